// GPU case: the output computed on a side stream the caller's stream never waits for, after a
// stall of about a millisecond there (catalog 9's shape: work off the stream a timer watches).
// PyTorch's rule for a tensor made on another stream is that the consumer's stream waits for it;
// this one does not, so with the default forward sync on CUDA (call: the output copy follows the
// current stream) the copy is taken before the side stream wrote the output: FAIL_INCORRECT,
// never a PASS timed without the side stream's work. Under --forward-sync each the harness waits
// for the whole device before the copy, and it passes with its stall inside every timed window.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "binding_registry.h"

cudaError_t launch_stall(long long cycles, cudaStream_t stream);
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
  TORCH_CHECK(launch_stall(2000000, side_stream()) == cudaSuccess, "stall");
  const cudaError_t status = launch_bias_relu_scale(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), x.numel(), x.size(1),
      static_cast<float>(scale), side_stream());
  TORCH_CHECK(status == cudaSuccess, cudaGetErrorString(status));
  return out;
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "on a side stream, not joined");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
