// GPU case (issue 10, class 1): cuBLAS used for work the rules do not allow it for (a scaled
// vector add, cublasSaxpy): cuBLAS is for GEMM only. REJECT_POLICY before anything runs.
#include <cublas_v2.h>
#include <cstdint>

#include <cuda_runtime.h>

namespace {

__global__ void relu_scale(float* out, int64_t n, float scale) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = out[i] > 0.f ? out[i] * scale : 0.f;
}

}  // namespace

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  static cublasHandle_t handle = [] { cublasHandle_t h; cublasCreate(&h); return h; }();
  cublasSetStream(handle, stream);
  cudaMemcpyAsync(out, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  const float one = 1.f;
  for (int64_t row = 0; row < n / cols; ++row) {
    cublasSaxpy(handle, static_cast<int>(cols), &one, bias, 1, out + row * cols, 1);
  }
  const int threads = 256;
  relu_scale<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream>>>(out, n, scale);
  return cudaGetLastError();
}
