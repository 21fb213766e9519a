# ASan + UBSan for the dev preset. Applied globally so that every object agrees on the instrumentation.
if(DSV4_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
# dsv4_quick_compile(target...): in the sanitizer build, compile these targets at -O0. They are HTTP / JSON / CLI
# glue (the server, the app, the bench client, their fakes and tests) whose run time in the tests is negligible, but
# at -O1 with ASan + UBSan their template-heavy translation units (cpp-httplib, nlohmann::json) took about twice as
# long to compile: the largest share of CI's build. The model, backends and everything the tests compute with stay
# at the preset's -O1.
function(dsv4_quick_compile)
  if(DSV4_SANITIZE)
    foreach(target IN LISTS ARGN)
      target_compile_options(${target} PRIVATE -O0)
    endforeach()
  endif()
endfunction()
# Fuzz builds instrument every library (coverage for libFuzzer, ASan/UBSan inside the code under test); the fuzz
# targets themselves add -fsanitize=fuzzer for libFuzzer's main (tests/fuzz/CMakeLists.txt).
if(DSV4_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
