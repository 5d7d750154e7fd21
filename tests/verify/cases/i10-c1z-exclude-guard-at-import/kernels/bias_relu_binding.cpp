#include <torch/extension.h>

#include "binding_registry.h"

void version();

static void register_bias_relu(pybind11::module& m) {
  m.def("version", &version);
}

REGISTER_BINDING(bias_relu, register_bias_relu);
