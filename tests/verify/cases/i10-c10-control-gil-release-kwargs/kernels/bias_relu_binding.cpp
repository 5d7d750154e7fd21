#include <torch/extension.h>

#include "binding_registry.h"

namespace py = pybind11;

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale);

static void register_bias_relu(py::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "max(x + bias, 0) * scale", py::arg("x"),
        py::arg("bias"), py::arg("scale") = 2.0);
}

REGISTER_BINDING(bias_relu, register_bias_relu);
