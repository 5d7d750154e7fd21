// GPU case (issue 10, class 1): a host function queued on the stream (cudaLaunchHostFunc), which
// the driver runs on a thread of its own, outside the audited call. REJECT_POLICY.
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

static void after(void*) {}

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  bias_relu_scale_kernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream>>>(
      x, bias, out, n, cols, scale);
  cudaLaunchHostFunc(stream, after, nullptr);
  return cudaGetLastError();
}
