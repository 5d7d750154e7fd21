// Issue 10 honest control: a CPU kernel written with what the object policy allows and torch
// extensions commonly use: at::empty, torch::empty_like, an accessor, AT_DISPATCH, TORCH_CHECK,
// contiguous(), sizes and dtypes. It must PASS.
#include <torch/extension.h>

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && x.size(1) == bias.size(0), "shape mismatch");
  TORCH_CHECK(x.scalar_type() == bias.scalar_type(), "dtype mismatch");
  const auto xc = x.contiguous();
  auto out = at::empty(xc.sizes(), xc.options());
  auto scratch = torch::empty_like(bias);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "bias_relu_scale", [&] {
    const auto in = xc.accessor<scalar_t, 2>();
    const auto b = bias.accessor<scalar_t, 1>();
    auto o = out.accessor<scalar_t, 2>();
    auto s = scratch.accessor<scalar_t, 1>();
    for (int64_t c = 0; c < b.size(0); ++c) s[c] = b[c];
    for (int64_t r = 0; r < in.size(0); ++r) {
      for (int64_t c = 0; c < in.size(1); ++c) {
        const scalar_t v = in[r][c] + s[c];
        o[r][c] = v > scalar_t(0) ? v * static_cast<scalar_t>(scale) : scalar_t(0);
      }
    }
  });
  return out;
}
