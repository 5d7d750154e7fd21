#include <torch/extension.h>
torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  return undeclared_tile(x);
}
