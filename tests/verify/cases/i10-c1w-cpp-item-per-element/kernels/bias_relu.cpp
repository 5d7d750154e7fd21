// Issue 10, class 1 (values read one by one): the extension's C++ reads every element through
// ATen's item() (a host read per element, not its data pointer) and writes the result with
// fill_ on a one-element view. Its kernel does no work of its own on the data.
#include <torch/extension.h>

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && x.size(1) == bias.size(0), "shape mismatch");
  auto out = torch::empty_like(x);
  for (int64_t r = 0; r < x.size(0); ++r) {
    for (int64_t c = 0; c < x.size(1); ++c) {
      const double v = x[r][c].item<double>() + bias[c].item<double>();
      out[r][c].fill_(v > 0 ? v * scale : 0.0);
    }
  }
  return out;
}
