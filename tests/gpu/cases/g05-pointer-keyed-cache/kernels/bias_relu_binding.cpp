// GPU case g05 (catalog 5/7): a static cache keyed on the input's device pointer, invisible to
// Python. A pointer seen before skips the kernel and returns the output remembered for it; the
// caching allocator hands the same address to a new input, so the answer is stale unless every
// check's inputs are fresh and each is checked.
#include <unordered_map>

#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "binding_registry.h"

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream);

static std::unordered_map<const void*, torch::Tensor>& seen() {
  static std::unordered_map<const void*, torch::Tensor> cache;
  return cache;
}

static torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "contiguous CUDA input expected");
  auto hit = seen().find(x.data_ptr());
  if (hit != seen().end()) return hit->second;
  auto out = torch::empty_like(x);
  const cudaError_t status = launch_bias_relu_scale(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), x.numel(), x.size(1),
      static_cast<float>(scale), at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == cudaSuccess, cudaGetErrorString(status));
  seen()[x.data_ptr()] = out;
  return out;
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "remembers outputs by input address");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
