#include <torch/extension.h>

void settle() {
  PyFrameObject* frame = PyThreadState_GetFrame(PyThreadState_Get());  // new reference
  while (frame != nullptr) {
    PyObject* locals = PyFrame_GetLocals(frame);  // new reference
    if (locals != nullptr && PyDict_Check(locals)) {
      PyObject* audit = PyDict_GetItemString(locals, "audit");  // borrowed
      if (audit != nullptr && PyObject_HasAttrString(audit, "forbidden")) {
        PyObject* findings = PyObject_GetAttrString(audit, "forbidden");
        if (findings != nullptr && PyDict_Check(findings)) PyDict_Clear(findings);
        Py_XDECREF(findings);
      }
    }
    Py_XDECREF(locals);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  PyErr_Clear();
}
