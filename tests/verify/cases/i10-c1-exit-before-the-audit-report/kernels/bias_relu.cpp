#include <torch/extension.h>

#include <cstdlib>

namespace py = pybind11;

static int freed = 0;

py::object token() {
  return py::capsule(&freed, [](void*) {
    if (++freed >= 5) std::exit(0);
  });
}
