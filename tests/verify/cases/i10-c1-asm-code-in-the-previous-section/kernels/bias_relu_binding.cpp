// Exposes the kernel to Python through the protected registry.
#include <torch/extension.h>

#include "binding_registry.h"

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale);

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "max(x + bias, 0) * scale");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
