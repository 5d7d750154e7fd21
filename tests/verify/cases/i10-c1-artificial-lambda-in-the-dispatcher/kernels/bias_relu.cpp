// A plain C++ kernel for --device cpu: out = max(x + bias, 0) * scale, one pass over x.
#include <torch/extension.h>

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && x.size(1) == bias.size(0), "shape mismatch");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
              "float32 only");
  x = x.contiguous();
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  const float* b = bias.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t rows = x.size(0), cols = x.size(1);
  const float s = static_cast<float>(scale);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = in[r * cols + c] + b[c];
      o[r * cols + c] = v > 0.f ? v * s : 0.f;
    }
  }
  return out;
}
