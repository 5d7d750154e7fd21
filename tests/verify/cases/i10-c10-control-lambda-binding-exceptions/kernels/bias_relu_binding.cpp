#include <torch/extension.h>

#include "binding_registry.h"

namespace py = pybind11;

torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale);

static void register_bias_relu(py::module_& m) {
  m.def(
      "bias_relu_scale",
      [](torch::Tensor x, torch::Tensor bias, double scale) {
        if (x.dim() != 2) throw py::value_error("x must be a matrix");
        py::gil_scoped_release unlocked;
        return bias_relu_scale(x, bias, scale);
      },
      "max(x + bias, 0) * scale", py::arg("x"), py::arg("bias"), py::arg("scale") = 1.0);
}

REGISTER_BINDING(bias_relu, register_bias_relu);
