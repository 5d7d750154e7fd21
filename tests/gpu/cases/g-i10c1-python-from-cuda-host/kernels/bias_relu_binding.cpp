// GPU case g-i10c1-python-from-cuda-host: the binding is honest; the host code it registers is not.
#include <torch/extension.h>

#include "binding_registry.h"

torch::Tensor bias_relu_scale_host(torch::Tensor x, torch::Tensor bias, double scale);

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale_host, "max(x + bias, 0) * scale");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
