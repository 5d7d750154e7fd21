// The signatures of the functions a candidate's extension registers with pybind11, read from its
// objects (object_policy.h). Key choice: values cross between Python and the candidate's C++
// only as tensors in and tensors out. Every function pybind11 registers instantiates
// cpp_function::initialize for its exact signature, R (*)(Args...), and that instantiation's
// symbols name it whatever the source spelled (alias, lambda, macro). A function returning
// numbers, strings or lists hands values to Python, where the operator audit cannot see what is
// computed with them; one taking a Python object (a handle, a list, a bytearray, a callable,
// std::function) lets C++ hand values to Python code or write them into Python objects' memory.
// Either way the work is done outside the candidate's kernels, so only these are allowed:
//   returns: void, a tensor, an optional tensor, a vector, tuple or pair of tensors;
//   arguments: those, numbers, bool, strings, torch's scalar, dtype, device, layout and memory
//   format, and optionals, vectors and ArrayRefs of them.
// pybind11's own internal callbacks (lambdas local to functions of pybind11's namespace, taking a
// handle and returning nothing) are glue; candidate sources may not reopen that namespace.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cudaagent {

// For one demangled symbol: nullopt unless it belongs to a cpp_function::initialize
// instantiation whose signature is not allowed; then the reason, for people. Pure.
std::optional<std::string> binding_signature_problem(std::string_view demangled);

// The signature "R (*)(A, B)" of a cpp_function::initialize instantiation the symbol belongs to,
// or empty. Exposed for tests.
std::string binding_signature_of(std::string_view demangled);

}  // namespace cudaagent
