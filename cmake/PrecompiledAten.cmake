# cudaagent_precompile_aten(<target>): ATen's headers precompiled once for <target>. Parsing them is
# about half of each libtorch translation unit's compile (measured on lib/train/rl_update.cpp:
# 11.4 s alone, 5.9 s with the header precompiled), and lib/train with its tests has some thirty
# such units, the slowest part of the build. Sources that include neither ATen nor torch headers
# (tokenizer, safetensors, HTTP) are left as they are: loading the header would only slow them.
# Call it from the CMakeLists.txt that creates <target> (source properties are per directory).
# cudaagent_precompile_aten(<target> REUSE_FROM <other>): <other>'s header instead of a new one
# (the test targets take lib/train's: making the header is itself a 40-second compile).
function(cudaagent_precompile_aten target)
  cmake_parse_arguments(ARG "" "REUSE_FROM" "" ${ARGN})
  if(ARG_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${ARG_REUSE_FROM})
    # gcc declines a header made with a macro defined that the user's command line lacks.
    get_target_property(definitions ${ARG_REUSE_FROM} COMPILE_DEFINITIONS)
    if(definitions)
      target_compile_definitions(${target} PRIVATE ${definitions})
    endif()
  else()
    target_precompile_headers(${target} PRIVATE <ATen/ATen.h>)
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  foreach(source ${sources})
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${dir} OUTPUT_VARIABLE path)
    file(STRINGS ${path} torch_includes REGEX "^#include <(ATen|torch)/" LIMIT_COUNT 1)
    if(NOT torch_includes)
      set_source_files_properties(${source} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()
