#include <torch/extension.h>

torch::Tensor bias_relu_scale(torch::Tensor x, c10::optional<torch::Tensor> bias, double scale) {
  TORCH_CHECK(x.dim() == 2, "x must be a matrix");
  x = x.contiguous();
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  const float* b = bias.has_value() ? bias->data_ptr<float>() : nullptr;
  float* o = out.data_ptr<float>();
  const int64_t rows = x.size(0), cols = x.size(1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = in[r * cols + c] + (b ? b[c] : 0.f);
      o[r * cols + c] = v > 0.f ? v * static_cast<float>(scale) : 0.f;
    }
  return out;
}
