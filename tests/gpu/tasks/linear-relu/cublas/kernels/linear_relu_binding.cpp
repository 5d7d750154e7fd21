// Checks shapes, allocates y and runs the launcher of linear_relu.cu on the caller's stream.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "binding_registry.h"

#include <cublas_v2.h>

cudaError_t launch_linear_relu_cublas(cublasHandle_t handle, const float* x, const float* weight,
                                     const float* bias, float* y, int rows, int cols, int depth,
                                     cudaStream_t stream);

static torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1) &&
                  bias.size(0) == weight.size(0),
              "shape mismatch");
  x = x.contiguous();
  weight = weight.contiguous();
  bias = bias.contiguous();
  auto y = torch::empty({x.size(0), weight.size(0)}, x.options());
  const int rows = static_cast<int>(x.size(0));
  const int cols = static_cast<int>(weight.size(0));
  const int depth = static_cast<int>(x.size(1));
  const cudaError_t status = launch_linear_relu_cublas(
      at::cuda::getCurrentCUDABlasHandle(), x.data_ptr<float>(), weight.data_ptr<float>(),
      bias.data_ptr<float>(), y.data_ptr<float>(), rows, cols, depth,
      at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == cudaSuccess, "linear_relu: ", cudaGetErrorString(status));
  return y;
}

static void register_linear_relu(pybind11::module& m) {
  m.def("linear_relu", &linear_relu, "relu(x @ weight.T + bias)");
}

REGISTER_BINDING(linear_relu, register_linear_relu);
