// GPU case (issue 10, class 1): the extension's host code in a .cu file reaches torch through
// pybind11's object API (module_::import, attribute calls) and lets torch compute the ReLU, the
// bias and the scale; no kernel of its own runs. Python from the candidate's own lines:
// REJECT_POLICY before anything runs (the line tables name this file's lines).
#include <torch/extension.h>

namespace py = pybind11;

torch::Tensor bias_relu_scale_host(torch::Tensor x, torch::Tensor bias, double scale) {
  py::object torch_module = py::module_::import("torch");
  py::object sum = torch_module.attr("add")(py::cast(x), py::cast(bias));
  py::object out = torch_module.attr("mul")(torch_module.attr("relu")(sum), scale);
  return out.cast<torch::Tensor>();
}
