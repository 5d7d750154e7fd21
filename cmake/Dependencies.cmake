# Every dependency comes from a Debian 12 package (scripts/setup.sh installs them) or the CUDA
# Toolkit. CUDA is optional: without it the GPU parts are left out and the build says so.
find_package(simdjson CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(CURL REQUIRED)  # HTTP to model servers (lib/core/http.cpp)
find_package(Threads REQUIRED)
# libseccomp compiles the sandbox's system-call filter (lib/core/sandbox_seccomp.cpp). Optional:
# without it the sandbox probe reports "no seccomp" and untrusted runs are refused.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(LIBSECCOMP QUIET IMPORTED_TARGET libseccomp)
endif()
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

# libtorch for cudaagent-train: Debian's libtorch-dev (CPU), or a pip torch given through
# CMAKE_PREFIX_PATH (python3 -c 'import torch; print(torch.utils.cmake_prefix_path)'). Optional:
# without it the training area is left out. Gloo's headers (libgloo-dev) switch on the CPU
# data-parallel path; torch's own build has Gloo inside, only the headers are needed.
set(CUDAAGENT_TRAIN "AUTO" CACHE STRING "Build cudaagent-train: AUTO (if libtorch is found), ON, OFF")
set_property(CACHE CUDAAGENT_TRAIN PROPERTY STRINGS AUTO ON OFF)
set(CUDAAGENT_HAVE_TORCH OFF)
if(NOT CUDAAGENT_TRAIN STREQUAL "OFF")
  find_package(Torch CONFIG QUIET)
  if(Torch_FOUND)
    set(CUDAAGENT_HAVE_TORCH ON)
    find_path(CUDAAGENT_GLOO_INCLUDE_DIR gloo/config.h HINTS ${TORCH_INCLUDE_DIRS})
    message(STATUS "cudaagent: libtorch found: cudaagent-train on "
                   "(gloo headers: ${CUDAAGENT_GLOO_INCLUDE_DIR})")
  elseif(CUDAAGENT_TRAIN STREQUAL "ON")
    message(FATAL_ERROR "cudaagent: CUDAAGENT_TRAIN=ON but libtorch was not found")
  else()
    message(STATUS "cudaagent: libtorch not found: cudaagent-train off")
  endif()
endif()
