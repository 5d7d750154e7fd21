#include <torch/extension.h>

#include "binding_registry.h"

namespace py = pybind11;

static void register_bias_relu(py::module_& m) {
  m.def("bias_relu_scale", [](torch::Tensor x, torch::Tensor bias, double scale) __attribute__((always_inline, artificial)) {
    py::object t = py::module_::import("torch");
    return t.attr("mul")(t.attr("relu")(t.attr("add")(x, bias)), scale).cast<torch::Tensor>();
  });
}

REGISTER_BINDING(bias_relu, register_bias_relu);
