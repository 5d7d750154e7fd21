#include <torch/extension.h>

#include "row_ops.h"

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat, "float32 only");
  auto xc = x.contiguous();
  auto bc = bias.contiguous();
  auto out = at::empty_like(xc);
  const int64_t rows = xc.size(0), cols = xc.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    rowops::bias_relu_row(xc.data_ptr<float>() + r * cols, bc.data_ptr<float>(),
                          out.data_ptr<float>() + r * cols, cols, static_cast<float>(scale));
  }
  return out;
}
