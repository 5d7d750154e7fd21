// Tests for the signatures a candidate's pybind11 functions may have (binding_signatures.h), on
// names as `nm -C` prints them for GCC 12 and Debian's torch (the real objects: the catalog's
// i10-c1-extension-* cases and every honest control, which must still pass).
#include "cudaagent/candidate/binding_signatures.h"

#include <doctest/doctest.h>

using cudaagent::binding_signature_of;
using cudaagent::binding_signature_problem;

namespace {

// The dispatcher pybind11 instantiates for `m.def(name, f, doc)` with f of type `signature`.
std::string dispatcher(const std::string& function, const std::string& signature) {
  return "pybind11::cpp_function::initialize<" + function + ", R, A, pybind11::name, pybind11::scope, "
         "pybind11::sibling, char [26]>(" + function + "&&, " + signature +
         ", pybind11::name const&, pybind11::scope const&, pybind11::sibling const&, char const (&) [26])"
         "::{lambda(pybind11::detail::function_call&)#3}::_FUN(pybind11::detail::function_call&)";
}

std::string pointer(const std::string& signature) {
  // Func of a function pointer: "R (*&)(A...)" for a signature "R (*)(A...)".
  std::string f = signature;
  f.replace(f.find("(*)"), 3, "(*&)");
  return dispatcher(f, signature);
}

}  // namespace

TEST_CASE("binding signatures: the signature is read from the dispatcher's name") {
  const std::string s = "at::Tensor (*)(at::Tensor, at::Tensor, double)";
  CHECK(binding_signature_of(pointer(s)) == s);
  CHECK(binding_signature_of("register_all(pybind11::module_&)") == "");
  const std::string types = "pybind11::cpp_function::initialize<std::vector<float, std::allocator<float> > (*&)"
                            "(at::Tensor), std::vector<float, std::allocator<float> >, at::Tensor, "
                            "pybind11::name>(std::vector<float, std::allocator<float> > (*&)(at::Tensor), "
                            "std::vector<float, std::allocator<float> > (*)(at::Tensor), "
                            "pybind11::name const&)::types";
  CHECK(binding_signature_of(types) == "std::vector<float, std::allocator<float> > (*)(at::Tensor)");
}

TEST_CASE("binding signatures: tensors in, tensors out; numbers, strings and torch's values as arguments") {
  for (const char* s : {
           "at::Tensor (*)(at::Tensor, at::Tensor, double)",
           "at::Tensor (*)(at::Tensor const&, c10::optional<at::Tensor> const&, long, bool)",
           "void (*)(at::Tensor&, at::Tensor const&)",
           "at::Tensor (*)()",
           "std::vector<at::Tensor, std::allocator<at::Tensor> > (*)(at::Tensor, c10::ArrayRef<long>)",
           "std::tuple<at::Tensor, at::Tensor> (*)(at::Tensor, std::vector<long, std::allocator<long> >)",
           "std::pair<at::Tensor, at::Tensor> (*)(std::vector<at::Tensor, std::allocator<at::Tensor> > const&)",
           "std::optional<at::Tensor> (*)(std::optional<at::Tensor>, std::optional<double>)",
           "at::Tensor (*)(at::Tensor, c10::Scalar const&, c10::ScalarType, c10::Device, "
           "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)",
       }) {
    CAPTURE(s);
    CHECK_FALSE(binding_signature_problem(pointer(s)));
  }
  // A lambda registered in place, and pybind11's own weak-reference callback.
  CHECK_FALSE(binding_signature_problem(dispatcher("register_x(pybind11::module_&)::{lambda(at::Tensor)#1}",
                                                   "at::Tensor (*)(at::Tensor)")));
  CHECK_FALSE(binding_signature_problem(dispatcher(
      "pybind11::detail::all_type_info_get_cache(_typeobject*)::{lambda(pybind11::handle)#1}",
      "void (*)(pybind11::handle)")));
  CHECK_FALSE(binding_signature_problem(dispatcher(
      "pybind11::detail::keep_alive_impl(pybind11::handle, pybind11::handle)::{lambda(pybind11::handle)#1}",
      "void (*)(pybind11::handle)")));
}

TEST_CASE("binding signatures: values out to Python, Python objects or code in, are refused") {
  for (const char* s : {
           "std::vector<float, std::allocator<float> > (*)(at::Tensor)",
           "double (*)(at::Tensor, long)",
           "long (*)(at::Tensor)",
           "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > (*)(at::Tensor)",
           "std::tuple<at::Tensor, double> (*)(at::Tensor)",
           "pybind11::list (*)(at::Tensor)",
           "at::Tensor (*)(at::Tensor, std::function<double (double, double)>)",
           "void (*)(at::Tensor, pybind11::handle)",
           "void (*)(at::Tensor, pybind11::bytearray)",
           "void (*)(at::Tensor, pybind11::object const&)",
           "at::Tensor (*)(Holder*, at::Tensor)",
           "at::Tensor (*)(std::map<long, double, std::less<long>, std::allocator<std::pair<long const, double> > >)",
       }) {
    CAPTURE(s);
    const auto problem = binding_signature_problem(pointer(s));
    REQUIRE(problem);
    CHECK(problem->find(s) != std::string::npos);
  }
  // pybind11's namespace gives a callback no pass unless it is the glue's shape (a lambda local to
  // one of pybind11's functions, taking a handle, returning nothing).
  CHECK(binding_signature_problem(dispatcher("pybind11::detail::mine()::{lambda(at::Tensor)#1}",
                                             "std::vector<float, std::allocator<float> > (*)(at::Tensor)")));
  CHECK(binding_signature_problem(dispatcher("mine()::{lambda(pybind11::handle)#1}",
                                             "void (*)(pybind11::handle)")));
  CHECK(binding_signature_problem(dispatcher("pybind11::detail::{lambda(pybind11::handle)#1}",
                                             "void (*)(pybind11::handle)")));
}
