// GPU case g01-stale-allocator-empty: launches nothing and returns the unwritten buffer, hoping it holds the reference output (catalog 1).
#include <cstdint>

#include <cuda_runtime.h>

namespace {

__global__ void bias_relu_scale_kernel(float* __restrict__ x, const float* __restrict__ bias,
                                       float* __restrict__ out, int64_t n, int64_t cols,
                                       float scale) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    out[i] = out[i];
  }
}

}  // namespace

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  (void)x, (void)bias, (void)out, (void)cols, (void)scale, (void)stream;
  return cudaSuccess;  // never launches
}
