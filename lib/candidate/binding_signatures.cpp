// Which signatures a candidate's pybind11 functions may have (binding_signatures.h), read from the
// demangled names of cpp_function::initialize's instantiations:
//   pybind11::cpp_function::initialize<Func, R, Args..., Extra...>(Func&&, R (*)(Args...),
//       Extra const&...)::{lambda(pybind11::detail::function_call&)#3}::_FUN(...)
// The second function parameter is the signature, written by the demangler in one canonical
// spelling (at::Tensor, long, std::vector<long, std::allocator<long> >, ...).
#include "cudaagent/candidate/binding_signatures.h"

#include <algorithm>
#include <array>
#include <vector>

namespace cudaagent {
namespace {

constexpr std::string_view kInitialize = "pybind11::cpp_function::initialize<";

// The parts of `text` between top-level commas, where parentheses and angle brackets nest.
std::vector<std::string_view> top_level_parts(std::string_view text) {
  std::vector<std::string_view> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '(' || c == '<' || c == '{' || c == '[') ++depth;
    if ((c == ')' || c == '>' || c == '}' || c == ']') && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  if (start < text.size() || !parts.empty()) parts.push_back(text.substr(start));
  for (std::string_view& part : parts) {
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
  }
  return parts;
}

// The index just past the bracket that closes the one opening at `open`, counting only `open`'s
// own kind of bracket; npos when unbalanced.
std::size_t past_closing(std::string_view text, std::size_t open) {
  const char opening = text[open];
  const char closing = opening == '<' ? '>' : ')';
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    if (text[i] == opening) ++depth;
    if (text[i] == closing && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

struct Registration {
  std::string_view function;   // Func: the function pointer's or the lambda's type
  std::string_view signature;  // "R (*)(Args...)"
};

std::optional<Registration> registration_of(std::string_view demangled) {
  const std::size_t at = demangled.find(kInitialize);
  if (at == std::string_view::npos) return std::nullopt;
  const std::size_t open = at + kInitialize.size() - 1;
  const std::size_t templates_end = past_closing(demangled, open);
  if (templates_end == std::string_view::npos || templates_end >= demangled.size() ||
      demangled[templates_end] != '(') {
    return std::nullopt;
  }
  const std::size_t params_end = past_closing(demangled, templates_end);
  if (params_end == std::string_view::npos) return std::nullopt;
  const auto templates = top_level_parts(demangled.substr(open + 1, templates_end - open - 2));
  const auto params = top_level_parts(demangled.substr(templates_end + 1, params_end - templates_end - 2));
  if (templates.empty() || params.size() < 2) return std::nullopt;
  return Registration{templates.front(), params[1]};
}

std::string_view without_qualifiers(std::string_view type) {
  for (bool again = true; again;) {
    again = false;
    for (std::string_view suffix : {"&&", "&", " const"}) {
      if (type.ends_with(suffix)) {
        type.remove_suffix(suffix.size());
        again = true;
      }
    }
    if (type.starts_with("const ")) {
      type.remove_prefix(6);
      again = true;
    }
    while (!type.empty() && type.back() == ' ') {
      type.remove_suffix(1);
      again = true;
    }
  }
  return type;
}

// "std::vector<X, std::allocator<X> >" with `name` "std::vector" -> its arguments; empty when the
// type is not that template.
std::vector<std::string_view> arguments_of(std::string_view type, std::string_view name) {
  if (!type.starts_with(name) || type.size() <= name.size() + 1 || type[name.size()] != '<' || type.back() != '>') {
    return {};
  }
  if (past_closing(type, name.size()) != type.size()) return {};
  return top_level_parts(type.substr(name.size() + 1, type.size() - name.size() - 2));
}

bool is_tensor(std::string_view type) { return type == "at::Tensor"; }

// C++ values that carry no Python object: numbers, bool, strings and torch's small value types.
bool is_plain_value(std::string_view type) {
  static constexpr std::array<std::string_view, 26> kValues = {
      "bool", "char", "signed char", "unsigned char", "short", "unsigned short", "int",
      "unsigned int", "long", "unsigned long", "long long", "unsigned long long", "float", "double",
      "long double", "c10::Scalar", "c10::ScalarType", "c10::Device", "c10::Layout",
      "c10::MemoryFormat", "c10::SymInt", "c10::Half", "c10::BFloat16",
      "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >",
      "std::basic_string_view<char, std::char_traits<char> >", "c10::basic_string_view<char>"};
  return std::find(kValues.begin(), kValues.end(), type) != kValues.end();
}

bool is_optional_of(std::string_view type, bool (*inner)(std::string_view)) {
  for (std::string_view name : {"c10::optional", "std::optional"}) {
    const auto args = arguments_of(type, name);
    if (args.size() == 1 && inner(args[0])) return true;
  }
  return false;
}

bool is_element(std::string_view type) { return is_tensor(type) || is_plain_value(type); }

bool is_allowed_argument(std::string_view raw) {
  const std::string_view type = without_qualifiers(raw);
  if (is_element(type) || is_optional_of(type, is_element)) return true;
  const auto vector = arguments_of(type, "std::vector");
  if (vector.size() == 2 && is_element(vector[0])) return true;
  for (std::string_view name : {"c10::ArrayRef", "c10::OptionalArrayRef"}) {
    const auto args = arguments_of(type, name);
    if (args.size() == 1 && is_element(args[0])) return true;
  }
  return false;
}

bool is_allowed_return(std::string_view raw) {
  const std::string_view type = without_qualifiers(raw);
  if (type == "void" || is_tensor(type) || is_optional_of(type, is_tensor)) return true;
  const auto vector = arguments_of(type, "std::vector");
  if (vector.size() == 2 && is_tensor(vector[0])) return true;
  for (std::string_view name : {"std::tuple", "std::pair"}) {
    const auto args = arguments_of(type, name);
    if (!args.empty() && std::all_of(args.begin(), args.end(), [](std::string_view a) {
          return is_tensor(without_qualifiers(a));
        })) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string binding_signature_of(std::string_view demangled) {
  const auto registration = registration_of(demangled);
  return registration ? std::string(registration->signature) : std::string();
}

std::optional<std::string> binding_signature_problem(std::string_view demangled) {
  const auto registration = registration_of(demangled);
  if (!registration) return std::nullopt;
  const std::string_view signature = registration->signature;
  // pybind11's own callbacks (its type cache's weak-reference cleanup, keep_alive's): a lambda
  // local to a function of pybind11's, taking a handle and returning nothing, is glue. Their exact
  // names vary with pybind11's version; a candidate cannot add a function to pybind11's namespace
  // (the source policy refuses reopening it: pybind11-namespace), so the namespace decides.
  const std::string_view function = registration->function;
  if (signature == "void (*)(pybind11::handle)" && function.starts_with("pybind11::") &&
      function.find(")::{lambda(pybind11::handle)#") != std::string_view::npos) {
    return std::nullopt;
  }
  const std::string why =
      "a function registered with pybind11 has the signature " + std::string(signature) + ": ";
  const std::string rule =
      "; the extension's functions take tensors, numbers, bool, strings and torch's dtypes and "
      "devices, and return tensors or nothing, so that nothing is computed from a tensor's values "
      "outside the candidate's kernels";
  const std::size_t star = signature.find(" (*)(");
  if (star == std::string_view::npos || signature.back() != ')') return why + "it cannot be read" + rule;
  const std::string_view result = signature.substr(0, star);
  const std::string_view arguments = signature.substr(star + 5, signature.size() - star - 6);
  if (!is_allowed_return(result)) {
    return why + "returning " + std::string(result) + " hands values to Python" + rule;
  }
  for (std::string_view argument : top_level_parts(arguments)) {
    if (!is_allowed_argument(argument)) {
      return why + "an argument of type " + std::string(argument) +
             " lets the C++ reach Python objects or call Python code" + rule;
    }
  }
  return std::nullopt;
}

}  // namespace cudaagent
