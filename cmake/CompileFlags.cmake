# Warning set for our own targets (never for third-party headers, which come in as SYSTEM).
add_library(cudaagent_flags INTERFACE)
target_compile_options(cudaagent_flags INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
  -Wnull-dereference -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
if(CUDAAGENT_WERROR)
  target_compile_options(cudaagent_flags INTERFACE -Werror)
endif()
if(CUDAAGENT_SANITIZE)
  target_compile_options(cudaagent_flags INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                         -fno-sanitize-recover=undefined)
  target_link_options(cudaagent_flags INTERFACE -fsanitize=address,undefined)
endif()
