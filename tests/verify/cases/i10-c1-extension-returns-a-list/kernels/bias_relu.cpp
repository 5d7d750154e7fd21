#include <vector>

#include <torch/extension.h>

std::vector<float> to_list(torch::Tensor t) {
  t = t.contiguous();
  const float* p = t.data_ptr<float>();
  return std::vector<float>(p, p + t.numel());
}

torch::Tensor from_list(const std::vector<float>& values, int64_t rows, int64_t cols) {
  auto out = torch::empty({rows, cols}, torch::TensorOptions().dtype(torch::kFloat32));
  std::copy(values.begin(), values.end(), out.data_ptr<float>());
  return out;
}
