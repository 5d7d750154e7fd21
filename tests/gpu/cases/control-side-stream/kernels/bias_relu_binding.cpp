// GPU control: honest work on a side stream of its own, ordered after the caller's stream and
// joined back into it before the output is returned, as PyTorch asks of any stream a module uses.
// Correct under either --forward-sync: must PASS, with the side stream's work in profile's
// window. (Without the join: g-unjoined-side-stream.)
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "binding_registry.h"

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream);

static cudaStream_t side_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t created = nullptr;
    cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking);
    return created;
  }();
  return stream;
}

static torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
  x = x.contiguous();
  bias = bias.contiguous();
  auto out = torch::empty_like(x);
  // The inputs were written on the caller's stream: order the side stream after it.
  cudaEvent_t ready;
  cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  cudaEventRecord(ready, at::cuda::getCurrentCUDAStream().stream());
  cudaStreamWaitEvent(side_stream(), ready, 0);
  cudaEventDestroy(ready);
  const cudaError_t status = launch_bias_relu_scale(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), x.numel(), x.size(1),
      static_cast<float>(scale), side_stream());
  TORCH_CHECK(status == cudaSuccess, cudaGetErrorString(status));
  // The caller reads `out` on its stream: that stream waits for the side stream's work.
  cudaEvent_t done;
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  cudaEventRecord(done, side_stream());
  cudaStreamWaitEvent(at::cuda::getCurrentCUDAStream().stream(), done, 0);
  cudaEventDestroy(done);
  return out;
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "on a side stream");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
