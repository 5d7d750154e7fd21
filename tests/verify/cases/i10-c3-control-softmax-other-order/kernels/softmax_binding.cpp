#include <torch/extension.h>

#include "binding_registry.h"

torch::Tensor row_softmax(torch::Tensor x);

static void register_row_softmax(pybind11::module& m) { m.def("row_softmax", &row_softmax); }

REGISTER_BINDING(row_softmax, register_row_softmax);
