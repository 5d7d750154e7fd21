// GPU case (issue 10, class 1): a libtorch symbol looked up at run time from the kernel file: the
// launcher finds ATen's CUDA ReLU by name. Tampering: FLAG_HACK before anything runs.
#include <dlfcn.h>
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
  // The address of at::cuda::relu(at::Tensor const&), to be called on a tensor made elsewhere.
  static void* relu = dlsym(RTLD_DEFAULT, "_ZN2at4cuda4reluERKNS_6TensorE");
  (void)relu;
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  bias_relu_scale_kernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream>>>(
      x, bias, out, n, cols, scale);
  return cudaGetLastError();
}
