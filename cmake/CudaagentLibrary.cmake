# cudaagent_add_library(<area> [DEPENDS <area>...] [OPTIONAL_DEPENDS <area>...] [LINKS <target>...]
#                       [PUBLIC_LINKS <target>...] [SOURCES <file>...])
# builds lib/<area>/*.cpp into the static library cudaagent_<area>. DEPENDS names the lower areas
# it may use (OPTIONAL_DEPENDS those it uses when they were built, such as cuda): they are linked, and tests/layers/check_layers.sh reads these same lines to fail the
# build's tests when a file includes a header of an area it did not declare (or a higher one).
function(cudaagent_add_library area)
  cmake_parse_arguments(ARG "" "" "DEPENDS;OPTIONAL_DEPENDS;LINKS;PUBLIC_LINKS;SOURCES" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  set(target cudaagent_${area})
  add_library(${target} STATIC ${sources} ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/lib/include)
  foreach(dependency ${ARG_DEPENDS})
    target_link_libraries(${target} PUBLIC cudaagent_${dependency})
  endforeach()
  foreach(dependency ${ARG_OPTIONAL_DEPENDS})
    if(TARGET cudaagent_${dependency})
      target_link_libraries(${target} PUBLIC cudaagent_${dependency})
    endif()
  endforeach()
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_LINKS} PRIVATE cudaagent_flags ${ARG_LINKS})
  set_property(GLOBAL APPEND PROPERTY CUDAAGENT_AREAS ${area})
endfunction()
