// GPU case (issue 10, class 1): ATen's CUDA function called from C++ (at::cuda::relu, the CUDA
// backend's entry, below the dispatcher and so below the operator audit); the kernel of
// bias_relu.cu does only the bias and the scale. REJECT_POLICY before anything runs.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/relu_cuda_dispatch.h>
#include <torch/extension.h>

#include "binding_registry.h"

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream);

static torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
  x = x.contiguous();
  bias = bias.contiguous();
  auto out = torch::empty_like(x);
  // scale > 0, so relu(x + b) * s == relu((x + b) * s): the kernel may leave out the ReLU.
  const cudaError_t status = launch_bias_relu_scale(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), x.numel(), x.size(1),
      static_cast<float>(scale), at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == cudaSuccess, "launch failed: ", cudaGetErrorString(status));
  return at::cuda::relu(out);
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "max(x + bias, 0) * scale");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
