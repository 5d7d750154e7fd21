# cudaagent_add_tool(<program> DEPENDS <area>...): builds tools/<program>/main.cpp into the
# executable cudaagent-<program>, linked against the areas it uses and nothing else, and installs it.
function(cudaagent_add_tool program)
  cmake_parse_arguments(ARG "" "" "DEPENDS" ${ARGN})
  set(target cudaagent-${program})
  add_executable(${target} main.cpp)
  foreach(area ${ARG_DEPENDS})
    target_link_libraries(${target} PRIVATE cudaagent_${area})
  endforeach()
  target_link_libraries(${target} PRIVATE cudaagent_flags)
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  install(TARGETS ${target} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  set_property(GLOBAL APPEND PROPERTY CUDAAGENT_PROGRAMS ${target})
endfunction()
