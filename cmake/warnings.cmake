# Warnings for the project's own targets (never for third-party code).
add_library(dsv4_warnings INTERFACE)
target_compile_options(dsv4_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused
                            -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough -Wformat=2>)
if(DSV4_WERROR)
  target_compile_options(dsv4_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
