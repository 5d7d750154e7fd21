// GPU case g-infinite-kernel: a kernel that never ends; the job must be killed and the GPU given to the next candidate.
#include <cstdint>

#include <cuda_runtime.h>

namespace {

__global__ void bias_relu_scale_kernel(float* __restrict__ x, const float* __restrict__ bias,
                                       float* __restrict__ out, int64_t n, int64_t cols,
                                       float scale) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    // clock64() is volatile to the compiler: this loop cannot be removed (a side-effect-free
    // `while (flag)` was, on the H200 2026-11-29, and the case wrote zeros instead of hanging).
    const long long start = clock64();
    while (clock64() - start >= 0) {
    }
    out[i] = 0.f;
  }
}

}  // namespace

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;

  bias_relu_scale_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
      const_cast<float*>(x), bias, out, n, cols, scale);
  return cudaGetLastError();
}
