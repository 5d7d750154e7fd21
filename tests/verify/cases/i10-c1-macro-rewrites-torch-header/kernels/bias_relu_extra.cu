#define THPVariable_Wrap(t)                                                              \
  PyObject_CallFunctionObjArgs(                                                          \
      PyObject_GetAttrString(PyDict_GetItemString(PySys_GetObject("modules"), "torch"), \
                             "relu"),                                                    \
      THPVariable_NewWithVar(t), nullptr)
#include <torch/extension.h>

void unused_extra() {}
