// The "candidate's own kernel" of tests/gpu/cupti_check.sh: a .so built with nvcc (its CUDA
// runtime linked in statically, as nvcc does by default), called from Python through ctypes.
#include <cuda_runtime.h>

__global__ void cupti_check_scale(float* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

extern "C" int cupti_check_launch(float* x, float a, int n, void* stream) {
  cupti_check_scale<<<(n + 255) / 256, 256, 0, static_cast<cudaStream_t>(stream)>>>(x, a, n);
  return static_cast<int>(cudaGetLastError());
}
