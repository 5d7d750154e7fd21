// Honest control: the example's binding with untyped pointers (`data_ptr()` cast by hand), a
// common style. In torch 2.x the untyped accessor calls c10::warnDeprecatedDataPtr inline, so the
// object policy must let that import through.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "binding_registry.h"

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream);

static torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && x.size(1) == bias.size(0), "shape mismatch");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
              "float32 only");
  x = x.contiguous();
  bias = bias.contiguous();
  auto out = torch::empty_like(x);
  const cudaError_t status = launch_bias_relu_scale(
      static_cast<const float*>(x.data_ptr()), static_cast<const float*>(bias.data_ptr()),
      static_cast<float*>(out.data_ptr()), x.numel(), x.size(1),
      static_cast<float>(scale), at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == cudaSuccess, "bias_relu_scale launch failed: ", cudaGetErrorString(status));
  return out;
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "max(x + bias, 0) * scale");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
