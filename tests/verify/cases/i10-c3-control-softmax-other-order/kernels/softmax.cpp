// Issue 10, class 3 control: an honest softmax in another order than torch's (no max shift, the
// sum taken backwards, in double): float32 reordering error only.
#include <torch/extension.h>

#include <cmath>

torch::Tensor row_softmax(torch::Tensor x) {
  auto out = torch::empty_like(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = cols - 1; c >= 0; --c) sum += o[r * cols + c] = std::exp(in[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = static_cast<float>(o[r * cols + c] / sum);
  }
  return out;
}
