# dsv4_add_module(NAME SOURCES ... [DEPS ...] [PUBLIC_DEPS ...])
# Builds src/<module> as the static library dsv4_<NAME>; include paths are rooted at src/ and include/.
function(dsv4_add_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;PUBLIC_DEPS" ${ARGN})
  if(NOT M_SOURCES)
    return()  # a module with no sources yet
  endif()
  add_library(dsv4_${name} STATIC ${M_SOURCES})
  target_include_directories(dsv4_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(dsv4_${name} PUBLIC ${M_PUBLIC_DEPS} PRIVATE dsv4_warnings ${M_DEPS})
endfunction()

# dsv4_add_test(NAME SOURCES ... LIBS ... [LABELS ...])
# A GoogleTest executable registered with CTest; LABELS pick the tier (unit, golden, ops, e2e, gpu).
function(dsv4_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main dsv4_warnings)
  target_compile_definitions(${name} PRIVATE DSV4_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(${name} PROPERTIES LABELS "${T_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()
