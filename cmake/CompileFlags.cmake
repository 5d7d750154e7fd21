# Warning set for our own targets (never for third-party headers, which come in as SYSTEM).
# cudaagent_warnings alone is for code that runs inside other processes (the CUPTI injection
# library): it must not carry the sanitizers, whose runtime the host process does not load.
add_library(cudaagent_warnings INTERFACE)
target_compile_options(cudaagent_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
  -Wnull-dereference -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
# GCC 12 reports impossible std::string memcpy overlaps at -O2/-O3 (GCC bugs 105329, 105651);
# the check is dropped there rather than contorting correct string code around it.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(cudaagent_warnings INTERFACE -Wno-restrict)
endif()
if(CUDAAGENT_WERROR)
  target_compile_options(cudaagent_warnings INTERFACE -Werror)
endif()
add_library(cudaagent_flags INTERFACE)
target_link_libraries(cudaagent_flags INTERFACE cudaagent_warnings)
if(CUDAAGENT_SANITIZE)
  target_compile_options(cudaagent_flags INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                         -fno-sanitize-recover=undefined)
  target_link_options(cudaagent_flags INTERFACE -fsanitize=address,undefined)
endif()
