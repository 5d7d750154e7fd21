// The epilogue of the cuDNN control: y = max(y + bias[channel], 0) in place, NCHW.
#include <cuda_runtime.h>

namespace {

__global__ void bias_relu_nchw(float* __restrict__ y, const float* __restrict__ bias, long long n,
                               int channels, int plane) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) {
    const float v = y[i] + bias[(i / plane) % channels];
    y[i] = v > 0.f ? v : 0.f;
  }
}

}  // namespace

cudaError_t launch_bias_relu_nchw(float* y, const float* bias, long long n, int channels, int plane,
                                  cudaStream_t stream) {
  const int threads = 256;
  bias_relu_nchw<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream>>>(
      y, bias, n, channels, plane);
  return cudaGetLastError();
}
