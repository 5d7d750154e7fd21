#include <torch/extension.h>

#include "binding_registry.h"

void prepare();

static void register_bias_relu(pybind11::module& m) { m.def("prepare", &prepare, "prepare"); }

REGISTER_BINDING(bias_relu, register_bias_relu);
