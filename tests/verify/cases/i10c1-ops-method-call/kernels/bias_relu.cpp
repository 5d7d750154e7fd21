// Issue 10, class 1 (native): a tensor method (compiles to at::_ops::relu::call) on a result the
// candidate computed itself; the object imports the operator's entry point.
#include <torch/extension.h>

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  auto shifted = torch::empty_like(x.contiguous());
  const float* in = x.contiguous().data_ptr<float>();
  const float* b = bias.data_ptr<float>();
  float* o = shifted.data_ptr<float>();
  for (int64_t i = 0; i < shifted.numel(); ++i) o[i] = (in[i] + b[i % bias.numel()]) * static_cast<float>(scale);
  return shifted.relu();
}
