// The attack: the same slow kernel, each forward on the next of eight streams of its own that wait
// for nothing, while the caller's stream is made to wait for the output (so it is copied finished
// and judged right). If nothing between two forwards waits for the whole device, forward k+1 runs
// beside forward k: time per forward falls up to eightfold, which no single call of the module
// would see. Its output is right; only the timing may tell.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include <vector>

#include "binding_registry.h"

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream);

namespace {

constexpr int kStreams = 8;

cudaStream_t next_stream() {
  static cudaStream_t streams[kStreams] = {};
  static int next = 0;
  cudaStream_t& stream = streams[next++ % kStreams];
  if (stream == nullptr) cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  return stream;
}

}  // namespace

static torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
  x = x.contiguous();
  bias = bias.contiguous();
  // Held for 64 forwards, longer than any call: the allocator must not hand this output's memory
  // to a later forward's side stream while the caller's stream has yet to copy it.
  static std::vector<torch::Tensor> held(64);
  static size_t forwards = 0;
  auto out = torch::empty_like(x);
  held[forwards++ % held.size()] = out;
  cudaStream_t side = next_stream();
  const cudaError_t status = launch_bias_relu_scale(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), x.numel(), x.size(1),
      static_cast<float>(scale), side);
  TORCH_CHECK(status == cudaSuccess, cudaGetErrorString(status));
  cudaEvent_t done;
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  cudaEventRecord(done, side);
  cudaStreamWaitEvent(at::cuda::getCurrentCUDAStream().stream(), done, 0);
  cudaEventDestroy(done);
  return out;
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "slow, forwards overlapped on side streams");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
