// The honest arm: the slow kernel on the caller's current stream, so forwards run one after the
// other whatever the runner does between them.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "binding_registry.h"

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream);

static torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
  x = x.contiguous();
  bias = bias.contiguous();
  auto out = torch::empty_like(x);
  const cudaError_t status = launch_bias_relu_scale(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), x.numel(), x.size(1),
      static_cast<float>(scale), at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == cudaSuccess, cudaGetErrorString(status));
  return out;
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "slow, on the current stream");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
