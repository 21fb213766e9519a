# Warnings for the project's own targets (never for third-party code).
add_library(dsv4_warnings INTERFACE)
target_compile_options(dsv4_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused
                            -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough -Wformat=2>)
if(DSV4_WERROR)
  target_compile_options(dsv4_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
# GCC 12 at -O3 reports -Wrestrict inside libstdc++'s std::string (GCC bug 105329): a library false positive.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(dsv4_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()
