// A single thread that waits about a millisecond (two million SM clock cycles) on the side stream
// before the output is written there.
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
