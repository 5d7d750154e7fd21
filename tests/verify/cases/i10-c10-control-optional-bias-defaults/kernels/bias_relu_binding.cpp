#include <torch/extension.h>

#include "binding_registry.h"

namespace py = pybind11;

torch::Tensor bias_relu_scale(torch::Tensor x, c10::optional<torch::Tensor> bias, double scale);

static void register_bias_relu(py::module& m) {
  m.def("bias_relu_scale", &bias_relu_scale, "max(x + bias, 0) * scale", py::arg("x"),
        py::arg("bias") = py::none(), py::arg("scale") = 2.0);
  m.def("bias_relu_scale_released", &bias_relu_scale, "the same, the GIL released", py::arg("x"),
        py::arg("bias").none(true) = c10::optional<torch::Tensor>(), py::arg("scale") = 2.0,
        py::call_guard<py::gil_scoped_release>());
}

REGISTER_BINDING(bias_relu, register_bias_relu);
