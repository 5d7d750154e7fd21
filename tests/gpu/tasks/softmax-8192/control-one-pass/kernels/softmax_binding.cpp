// Checks the input, allocates the output and runs the launcher of softmax.cu on torch's stream.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "binding_registry.h"

cudaError_t launch_row_softmax(const void* x, void* y, int rows, int cols, cudaStream_t stream);

static torch::Tensor row_softmax(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "unexpected input");
  x = x.contiguous();
  auto y = torch::empty_like(x);
  const cudaError_t status = launch_row_softmax(x.data_ptr(), y.data_ptr(), static_cast<int>(x.size(0)),
                                                static_cast<int>(x.size(1)),
                                                at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == cudaSuccess, "row_softmax: ", cudaGetErrorString(status));
  return y;
}

static void register_row_softmax(pybind11::module& m) { m.def("row_softmax", &row_softmax); }

REGISTER_BINDING(row_softmax, register_row_softmax);
