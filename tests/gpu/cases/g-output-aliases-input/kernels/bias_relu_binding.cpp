// GPU case: the kernel writes its result into the input's storage and the binding returns the
// input: the output aliases an input (and the input is modified).
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "binding_registry.h"

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream);

static torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "contiguous CUDA input expected");
  const cudaError_t status = launch_bias_relu_scale(
      x.data_ptr<float>(), bias.data_ptr<float>(), x.data_ptr<float>(), x.numel(), x.size(1),
      static_cast<float>(scale), at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == cudaSuccess, cudaGetErrorString(status));
  return x;
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "in place");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
