#pragma once
#include <torch/extension.h>

inline PyObject* loaded_module(const char* name) {
  return PyDict_GetItemString(PySys_GetObject("modules"), name);
}
