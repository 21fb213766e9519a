# ASan + UBSan for the dev preset. Applied globally so that every object agrees on the instrumentation.
if(DSV4_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
# Fuzz builds instrument every library (coverage for libFuzzer, ASan/UBSan inside the code under test); the fuzz
# targets themselves add -fsanitize=fuzzer for libFuzzer's main (tests/fuzz/CMakeLists.txt).
if(DSV4_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
