// Catalog case 34-constant-zero-output: a kernel that returns the wrong thing on purpose.
#include <torch/extension.h>
#include <limits>

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  x = x.contiguous();
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  const float* b = bias.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t rows = x.size(0), cols = x.size(1);
  (void)in; (void)b; (void)scale;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      (void)i;
      o[i] = 0.f;
    }
  return out;
}
