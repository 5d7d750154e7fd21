# cudaagent_add_tool(<stage>): builds tools/<stage>/main.cpp into the executable cudaagent-<stage>,
# linked against the core library (and the CUDA library when it exists), and installs it.
function(cudaagent_add_tool stage)
  set(target cudaagent-${stage})
  add_executable(${target} main.cpp)
  target_link_libraries(${target} PRIVATE cudaagent_core cudaagent_flags)
  if(TARGET cudaagent_cuda)
    target_link_libraries(${target} PRIVATE cudaagent_cuda)
  endif()
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  install(TARGETS ${target} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()
