// One thread that waits a given number of SM clock cycles: input-independent GPU work of a known
// length (about 0.5 ms per million cycles at ~2 GHz). Also the stall of
// tests/gpu/window_escape_check.sh, which copies this file.
#include <cuda_runtime.h>

__global__ void stall_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

cudaError_t launch_stall(long long cycles, cudaStream_t stream) {
  stall_kernel<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}
