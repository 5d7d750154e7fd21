#include <torch/extension.h>

#include <vector>

#include "binding_registry.h"

std::vector<torch::Tensor> values_as_shapes(torch::Tensor t);

static void register_bias_relu(pybind11::module& m) {
  m.def("values_as_shapes", &values_as_shapes, "one empty tensor per value, sized by its bits");
}

REGISTER_BINDING(bias_relu, register_bias_relu);
