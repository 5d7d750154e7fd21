// out = max(x + bias, 0) * scale, one thread per element. Plain CUDA, no torch headers: nvcc
// compiles this file in about a second, so an edit to the kernel rebuilds fast. The binding
// (bias_relu_binding.cpp) checks the tensors and passes raw pointers and the current stream.
#include <cstdint>

#include <cuda_runtime.h>

namespace {

__global__ void bias_relu_scale_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                       float* __restrict__ out, int64_t n, int64_t cols,
                                       float scale) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    const float v = x[i] + bias[i % cols];
    out[i] = v > 0.f ? v * scale : 0.f;
  }
}

}  // namespace

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  bias_relu_scale_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x, bias, out, n,
                                                                                 cols, scale);
  return cudaGetLastError();
}
