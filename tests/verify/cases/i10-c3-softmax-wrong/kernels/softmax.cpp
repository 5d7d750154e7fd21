// Issue 10, class 3: the softmax of half the input. Every output is near 1e-4, so with atol = 0.01
// the old rule passed it although nearly every element is wrong.
#include <torch/extension.h>

#include <cmath>

torch::Tensor row_softmax(torch::Tensor x) {
  auto out = torch::empty_like(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0.f;
    for (int64_t c = 0; c < cols; ++c) sum += o[r * cols + c] = std::exp(0.5f * in[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) o[r * cols + c] /= sum;
  }
  return out;
}
