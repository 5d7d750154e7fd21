// GPU case g19 (catalog 19): the binding does the work with torch's own operators instead of a
// kernel of the candidate's: the source policy must reject it before anything runs.
#include <torch/extension.h>

#include "binding_registry.h"

static torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  return torch::relu(x + bias) * scale;
}

static void register_bias_relu(pybind11::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "max(x + bias, 0) * scale");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
