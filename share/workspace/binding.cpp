// binding.cpp: the protected module definition of the candidate's extension. It only applies what
// the kernels/*_binding.cpp files registered with REGISTER_BINDING (binding_registry.h beside it).
// Key choice: the module name is fixed here, not taken from a build flag, because model_new.py is
// written against it (`import cuda_extension`) and the build must not be able to rename the module.
//
// The harness always compiles this pristine copy; a workspace's own binding.cpp is never used, and
// one whose bytes differ is a policy finding (cudaagent(7), SANDBOX).
#include "binding_registry.h"

// The init function is PyInit_cuda_extension, so the built file must be named cuda_extension.so (or
// carry the interpreter's extension suffix) and sit on sys.path.
PYBIND11_MODULE(cuda_extension, module) { cudaagent_bindings::apply_registrations(module); }
