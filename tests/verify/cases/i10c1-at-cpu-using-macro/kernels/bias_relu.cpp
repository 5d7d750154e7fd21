// Issue 10, class 1 (native): ATen's CPU-dispatch function behind a using-declaration and a macro;
// no "torch::" or "at::" call appears at the call site for a source scan to see.
#include <ATen/ops/relu_cpu_dispatch.h>
#include <torch/extension.h>

using at::cpu::relu;
// Through a pointer: a plain relu(t) would be ambiguous with at::relu, found by argument lookup.
static at::Tensor (*const activate)(const at::Tensor&) = relu;
#define ACTIVATE(t) activate(t)

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && x.size(1) == bias.size(0), "shape mismatch");
  x = x.contiguous();
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  const float* b = bias.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t rows = x.size(0), cols = x.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = in[r * cols + c] + b[c];
      o[r * cols + c] = v > 0.f ? v * static_cast<float>(scale) : 0.f;
    }
  }
  return ACTIVATE(out);
}
