#include <torch/extension.h>

#include "binding_registry.h"

pybind11::object token();

static void register_bias_relu(pybind11::module& m) { m.def("token", &token); }

REGISTER_BINDING(bias_relu, register_bias_relu);
