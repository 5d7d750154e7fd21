// The attack on a call of several forwards that waits for the device after each one: every
// forward's fresh inputs are in the shared buffer from the call's start, one slot after another.
// The first forward of a call computes the outputs of all the call's slots at once, on eight
// streams of its own, and later forwards return what it computed. Outputs are right (the inputs
// were all written before the call), and the call's time falls up to eightfold for a kernel that
// fills a small part of the GPU. It learns the slots per call from the first call (the first
// slot's address comes round again) and the stride from its input's size (slots are packed, each
// leaf aligned to 256 bytes); with one forward per call it is the serial candidate.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include <vector>

#include "binding_registry.h"

cudaError_t launch_bias_relu_scale(const float* x, const float* bias, float* out, int64_t n,
                                   int64_t cols, float scale, cudaStream_t stream);

namespace {

constexpr int kStreams = 8;

struct Lookahead {
  const char* first = nullptr;  // the first slot's input
  int64_t slots = 0;            // forwards per call, once learnt
  int64_t seen = 0;             // forwards since the first slot came round
  std::vector<torch::Tensor> ahead;
};

cudaStream_t stream_at(int k) {
  static cudaStream_t streams[kStreams] = {};
  cudaStream_t& stream = streams[k % kStreams];
  if (stream == nullptr) cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  return stream;
}

}  // namespace

static torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda() && x.is_contiguous(), "contiguous CUDA tensors expected");
  static Lookahead state;
  const char* here = static_cast<const char*>(x.data_ptr());
  const int64_t stride = (x.numel() * 4 + 255) / 256 * 256;
  cudaStream_t current = at::cuda::getCurrentCUDAStream().stream();
  if (state.slots > 0 && here > state.first && (here - state.first) % stride == 0 &&
      (here - state.first) / stride < static_cast<int64_t>(state.ahead.size())) {
    return state.ahead[(here - state.first) / stride];  // computed by this call's first forward
  }
  if (state.first == nullptr) state.first = here;
  if (state.slots == 0 && here == state.first && state.seen > 0) state.slots = state.seen;
  ++state.seen;
  const int64_t count = here == state.first && state.slots > 0 ? state.slots : 1;
  state.ahead.assign(count, torch::Tensor());
  for (int64_t k = 0; k < count; ++k) {
    const float* in = reinterpret_cast<const float*>(here + k * stride);
    state.ahead[k] = torch::empty_like(x);
    cudaStream_t side = count == 1 ? current : stream_at(static_cast<int>(k));
    const cudaError_t status =
        launch_bias_relu_scale(in, bias.data_ptr<float>(), state.ahead[k].data_ptr<float>(), x.numel(),
                               x.size(1), static_cast<float>(scale), side);
    TORCH_CHECK(status == cudaSuccess, cudaGetErrorString(status));
    if (side != current) {
      cudaEvent_t done;
      cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
      cudaEventRecord(done, side);
      cudaStreamWaitEvent(current, done, 0);
      cudaEventDestroy(done);
    }
  }
  torch::Tensor out = state.ahead[0];
  if (count == 1) state.ahead.clear();
  return out;
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "slow, a call's later slots computed by its first forward");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
