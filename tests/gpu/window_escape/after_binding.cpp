// Input-independent work after the output is final: the output's kernel on the caller's stream,
// then a stall of about 0.5 ms on a stream of the candidate's own, ordered after that kernel and
// never joined back (standing for work a candidate would rather not be timed, such as zeroing a
// buffer for its next call). With --forward-sync each the runner waits for the whole device before
// the output is copied, so the stall is inside the window; with call, the copy and "done" follow
// the caller's stream only and the stall runs after the window closes.
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
  cudaStream_t current = at::cuda::getCurrentCUDAStream().stream();
  const cudaError_t status = launch_bias_relu_scale(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), x.numel(), x.size(1),
      static_cast<float>(scale), current);
  TORCH_CHECK(status == cudaSuccess, cudaGetErrorString(status));
  cudaEvent_t computed;
  cudaEventCreateWithFlags(&computed, cudaEventDisableTiming);
  cudaEventRecord(computed, current);
  cudaStreamWaitEvent(side_stream(), computed, 0);
  cudaEventDestroy(computed);
  TORCH_CHECK(launch_stall(1000000, side_stream()) == cudaSuccess, "stall");
  return out;
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "the output, then a stall nobody waits for");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
