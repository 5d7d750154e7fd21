# Every dependency comes from a Debian 12 package (scripts/setup.sh installs them) or the CUDA
# Toolkit. CUDA is optional: without it the GPU parts are left out and the build says so.
find_package(simdjson CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(CURL REQUIRED)  # HTTP to model servers (lib/llm/http.cpp)
find_package(Threads REQUIRED)
# libseccomp compiles the sandbox's system-call filter (lib/sandbox/seccomp_filter.cpp). Optional:
# without it the sandbox probe reports "no seccomp" and untrusted runs are refused.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(LIBSECCOMP QUIET IMPORTED_TARGET libseccomp)
endif()
# PCRE2 is the Grep tool's regex engine (lib/rollout).
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
if(CUDAAGENT_BUILD_TESTS)
  find_package(doctest CONFIG REQUIRED)
endif()

set(CUDAAGENT_HAVE_CUDA OFF)
if(NOT CUDAAGENT_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::nvrtc AND TARGET CUDA::cupti)
    set(CUDAAGENT_HAVE_CUDA ON)
    message(STATUS "cudaagent: CUDA Toolkit ${CUDAToolkit_VERSION} found: GPU parts (NVRTC, CUPTI) on")
  elseif(CUDAAGENT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "cudaagent: CUDAAGENT_CUDA=ON but no CUDA Toolkit with NVRTC and CUPTI was found")
  else()
    message(STATUS "cudaagent: no CUDA Toolkit with NVRTC and CUPTI found: GPU parts off "
                   "(set CUDAToolkit_ROOT to enable them)")
  endif()
else()
  message(STATUS "cudaagent: CUDAAGENT_CUDA=OFF: GPU parts off")
endif()
