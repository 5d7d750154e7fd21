#include <torch/extension.h>

#include "binding_registry.h"

torch::Tensor conv2d_bias(torch::Tensor x, torch::Tensor weight, torch::Tensor conv_bias,
                          torch::Tensor bias);

static void register_conv2d_bias(pybind11::module& m) { m.def("conv2d_bias", &conv2d_bias); }

REGISTER_BINDING(conv2d_bias, register_conv2d_bias);
