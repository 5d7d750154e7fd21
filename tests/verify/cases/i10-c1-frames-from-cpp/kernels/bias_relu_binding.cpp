#include <torch/extension.h>

#include "binding_registry.h"

void settle();

static void register_bias_relu(pybind11::module& m) { m.def("settle", &settle, "settle"); }

REGISTER_BINDING(bias_relu, register_bias_relu);
