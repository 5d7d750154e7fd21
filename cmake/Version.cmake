# The commit in `--version` is read at build time, not configure time, so it never goes stale:
# a custom target rewrites build_info.cpp whenever `git describe` changes (and only then).
set(CUDAAGENT_BUILD_INFO_CPP ${PROJECT_BINARY_DIR}/generated/build_info.cpp)
add_custom_target(cudaagent_build_info
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${CUDAAGENT_BUILD_INFO_CPP}
          -DVERSION=${PROJECT_VERSION} -P ${PROJECT_SOURCE_DIR}/cmake/WriteBuildInfo.cmake
  BYPRODUCTS ${CUDAAGENT_BUILD_INFO_CPP}
  COMMENT "Reading the git commit for --version")
