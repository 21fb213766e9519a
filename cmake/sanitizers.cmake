# ASan + UBSan for the dev preset. Applied globally so that every object agrees on the instrumentation.
if(DSV4_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
