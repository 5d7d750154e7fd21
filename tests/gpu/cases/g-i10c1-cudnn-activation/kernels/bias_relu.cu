// GPU case (issue 10, class 1): cuDNN used for an activation (cudnnActivationForward), not a
// convolution: cuDNN is for convolution only. REJECT_POLICY before anything runs.
#include <cudnn.h>
#include <cstdint>

#include <cuda_runtime.h>

namespace {

__global__ void bias_scale(const float* x, const float* bias, float* out, int64_t n, int64_t cols,
                           float scale) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = (x[i] + bias[i % cols]) * scale;
}

}  // namespace

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  bias_scale<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream>>>(x, bias, out, n, cols, scale);
  static cudnnHandle_t handle = [] { cudnnHandle_t h; cudnnCreate(&h); return h; }();
  cudnnSetStream(handle, stream);
  cudnnTensorDescriptor_t desc;
  cudnnActivationDescriptor_t relu;
  cudnnCreateTensorDescriptor(&desc);
  cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, static_cast<int>(n));
  cudnnCreateActivationDescriptor(&relu);
  cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0);
  const float one = 1.f, zero = 0.f;
  cudnnActivationForward(handle, relu, &one, desc, out, &zero, desc, out);
  cudnnDestroyActivationDescriptor(relu);
  cudnnDestroyTensorDescriptor(desc);
  return cudaGetLastError();
}
