// binding_registry.h: the protected registration glue that every candidate binding includes.
// A kernels/<stem>_binding.cpp says `REGISTER_BINDING(name, func);` at namespace scope, and the
// module init in binding.cpp calls each registered `func(module)` once, in registration order. Key
// choice: registrations form a list of nodes that live inside the candidates' own static objects,
// headed by a zero-initialised pointer, so there is no allocation, no singleton constructor and no
// init-order trap.
//
// The harness always compiles this pristine copy, never the workspace's (cudaagent(7), SANDBOX). The
// macro keeps the name and arguments of the CUDA Agent workspace idiom, so bindings written for it
// build unchanged. It is code that runs inside the candidate's process: it is glue, not a security
// boundary.
#pragma once

// Bindings written for the CUDA Agent workspace get these through this header and may rely on them:
// pybind11/stl.h in particular supplies the std::vector / std::map <-> Python conversions that a
// binding returning several tensors needs, and those casters must be visible in every translation
// unit that converts such types.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <string>
#include <vector>

// Hidden visibility keeps the list private to this extension's shared object: with default
// visibility the inline variable below would be a unique symbol that the dynamic linker could merge
// with another extension built from the same header in the same process.
namespace [[gnu::visibility("hidden")]] cudaagent_bindings {

using BindFunction = void (*)(pybind11::module_&);

struct Registration {
  const char* name;  // REGISTER_BINDING's first argument, for a person in a debugger
  BindFunction bind;
  const Registration* previous;  // the registration made just before this one, or null
};

// The newest registration. Constant (zero) initialisation happens before any dynamic initialiser,
// so a registrar in any translation unit, constructed in any order, finds a valid list.
inline const Registration* newest_registration = nullptr;

// One per REGISTER_BINDING. Constructed while the shared object loads (before Python calls the
// module init); it only links its node into the list and never allocates or throws.
class Registrar {
 public:
  Registrar(const char* name, BindFunction bind) noexcept : node_{name, bind, newest_registration} {
    newest_registration = &node_;
  }
  Registrar(const Registrar&) = delete;
  Registrar& operator=(const Registrar&) = delete;

 private:
  Registration node_;
};

// Runs every registered function on the module, oldest first. The order matters when two bindings
// define the same Python name: pybind11 chains them as overloads and tries them in definition
// order. Registration order is the order of static initialisation, i.e. the link order of the
// objects, so a build that links them sorted by path gets the same order every time. An exception
// from a binding propagates out of the module init, so `import cuda_extension` fails with it.
inline void apply_registrations(pybind11::module_& module) {
  std::vector<const Registration*> oldest_first;
  for (const Registration* r = newest_registration; r != nullptr; r = r->previous) {
    oldest_first.push_back(r);
  }
  for (auto it = oldest_first.rbegin(); it != oldest_first.rend(); ++it) {
    (*it)->bind(module);
  }
}

}  // namespace cudaagent_bindings

// REGISTER_BINDING(name, func): `name` is an identifier, unique within its file (it names a static
// object, so the same name in two files is fine); `func` is anything callable as
// `func(pybind11::module_&)`, usually `void register_x(pybind11::module& m)`. Use it at namespace
// scope and end it with a semicolon. The captureless lambda lets `func` be an overloaded function
// or a function object as well as a plain function, while still converting to a function pointer.
#define REGISTER_BINDING(name, func)                                         \
  static ::cudaagent_bindings::Registrar cudaagent_binding_registrar_##name( \
      #name, [](::pybind11::module_& cudaagent_module) { func(cudaagent_module); })
