// Which source line reaches Python (object_lines.h). objdump's `-l --inlines` output, per
// instruction: "NAME():" when the innermost function changes, "FILE:LINE" (perhaps with
// " (discriminator N)") when the line changes, then one "inlined by FILE:LINE (CALLER)" per call
// site the code was inlined through, printed again before every instruction that has them; then
// the instruction row, "ADDR:<TAB>insn[<TAB>OFFSET: R_TYPE<TAB>SYMBOL+-ADDEND]...".
#include "cudaagent/candidate/object_lines.h"

#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cudaagent/candidate/object_policy.h"
#include "tool_text.h"

namespace cudaagent {
namespace {

using tool_text::for_each_line;
using tool_text::starts;

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "FILE:LINE" -> frame; false when the text has no ":LINE" ending.
bool parse_file_line(std::string_view text, SourceFrame& frame) {
  if (const std::size_t d = text.rfind(" (discriminator "); d != std::string_view::npos && text.back() == ')') {
    text = text.substr(0, d);
  }
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || !all_digits(text.substr(colon + 1)) || colon + 1 + 9 < text.size()) {
    return false;
  }
  frame.file = text.substr(0, colon);
  if (frame.file == "???") frame.file.clear();
  frame.line = std::atoi(std::string(text.substr(colon + 1)).c_str());
  return true;
}

// What one line of the output is.
enum class LineKind { kOther, kSection, kSymbol, kFunction, kFileLine, kInlinedBy, kInstruction };

LineKind kind_of(std::string_view line) {
  if (starts(line, "Disassembly of section ")) return LineKind::kSection;
  const std::size_t tab = line.find('\t');
  if (tab != std::string_view::npos) {
    return tab > 0 && line[tab - 1] == ':' ? LineKind::kInstruction : LineKind::kOther;
  }
  if (starts(line, "inlined by ")) return LineKind::kInlinedBy;
  if (line.size() > 3 && line.ends_with(">:") && line.find(" <") != std::string_view::npos) return LineKind::kSymbol;
  if (line.size() > 3 && line.ends_with("():")) return LineKind::kFunction;
  SourceFrame ignored;
  if (parse_file_line(line, ignored)) return LineKind::kFileLine;
  return LineKind::kOther;
}

// The symbols an instruction row references: each relocation's symbol (addend, section prefix
// and clone suffix off), or, for a call or jump with no relocation, the function it names.
std::vector<std::string> referenced_symbols(std::string_view row) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= row.size()) {
    std::size_t tab = row.find('\t', start);
    if (tab == std::string_view::npos) tab = row.size();
    parts.push_back(row.substr(start, tab - start));
    start = tab + 1;
  }
  std::vector<std::string> out;
  for (std::size_t i = 2; i + 1 < parts.size(); ++i) {
    if (parts[i].find(": R_") == std::string_view::npos) continue;
    std::string_view symbol = parts[i + 1];
    for (std::string_view addend : {"+0x", "-0x"}) {
      if (const std::size_t at = symbol.rfind(addend); at != std::string_view::npos && at > 0) symbol = symbol.substr(0, at);
    }
    for (std::string_view section : {".text.unlikely.", ".text.hot.", ".text.startup.", ".text."}) {
      if (starts(symbol, section)) {
        symbol.remove_prefix(section.size());
        break;
      }
    }
    out.emplace_back(symbol);
    ++i;
  }
  if (out.empty() && parts.size() >= 2) {
    const std::string_view insn = parts[1];
    if (starts(insn, "call") || starts(insn, "jmp")) {
      const std::size_t open = insn.find(" <");
      if (open != std::string_view::npos && insn.back() == '>' && insn.find("+0x", open) == std::string_view::npos) {
        out.emplace_back(insn.substr(open + 2, insn.size() - open - 3));
      }
    }
  }
  return out;
}

// Walks the output, calling `at(row, location, targets)` for each instruction row that references
// a symbol reaching Python; location[0] is the row's own line.
template <class Fn>
void for_each_python_reference(std::string_view text, Fn&& at) {
  SourceFrame own;
  std::vector<SourceFrame> inlined_by;
  bool row_seen = true;  // the "inlined by" lines before a row are that row's whole chain
  for_each_line(text, [&](std::string_view line) {
    switch (kind_of(line)) {
      case LineKind::kSection:
      case LineKind::kSymbol:
        own = {};
        inlined_by.clear();
        row_seen = true;
        return;
      case LineKind::kFunction:
        own.function = line.substr(0, line.size() - 3);
        return;
      case LineKind::kFileLine:
        parse_file_line(line, own);
        return;
      case LineKind::kInlinedBy: {
        if (row_seen) inlined_by.clear();
        row_seen = false;
        std::string_view rest = line.substr(11);
        // "FILE:LINE (NAME)": the first " (" after a ":LINE" (a name may hold " (" itself).
        SourceFrame frame;
        bool parsed = false;
        for (std::size_t open = rest.find(" ("); open != std::string_view::npos && !parsed && rest.back() == ')';
             open = rest.find(" (", open + 1)) {
          if (parse_file_line(rest.substr(0, open), frame) && rest.substr(0, open).find(" (") == std::string_view::npos) {
            frame.function = rest.substr(open + 2, rest.size() - open - 3);
            parsed = true;
          }
        }
        if (!parsed) frame = {};  // unknown: the candidate's
        inlined_by.push_back(std::move(frame));
        return;
      }
      case LineKind::kInstruction: {
        if (row_seen) inlined_by.clear();
        row_seen = true;
        std::vector<std::string> targets;
        for (std::string& symbol : referenced_symbols(line)) {
          if (reaches_python(symbol)) targets.push_back(std::move(symbol));
        }
        if (targets.empty()) return;
        std::vector<SourceFrame> location{own};
        location.insert(location.end(), inlined_by.begin(), inlined_by.end());
        at(line, location, targets);
        return;
      }
      case LineKind::kOther:
        return;
    }
  });
}

std::string demangled(const std::string& name) {
  std::string base = name.substr(0, name.find('.'));  // clone suffixes: .isra.0, .part.1, .cold
  if (!starts(base, "_Z")) return base;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(base.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && text ? std::string(text.get()) : base;
}

// pybind11's entry points a candidate's own code may call: registering functions and their
// arguments, releasing the GIL, dropping an object it was handed, and pybind11's exception types.
// `body_file` is where the function's code lies (a glue header). A function without a linkage
// name (module_::def instantiated for a lambda, whose type has none) is named by objdump without
// its class: such a name counts when its code lies in pybind11's own headers.
bool registration_entry_point(const std::string& function, const std::string& body_file) {
  const std::string plain = function.substr(0, function.find('<'));
  if (!starts(function, "_Z") && plain.find("::") == std::string::npos) {
    static constexpr std::array<std::string_view, 11> kPlain = {
        "def", "arg", "arg_v", "~arg_v", "~object", "dec_ref", "gil_scoped_release",
        "~gil_scoped_release", "gil_scoped_acquire", "~gil_scoped_acquire", "pybind11_fail"};
    const std::string name = plain.substr(0, plain.find('.'));
    return body_file.find("/pybind11/") != std::string::npos &&
           std::find(kPlain.begin(), kPlain.end(), name) != kPlain.end();
  }
  const std::string path = symbol_path(demangled(function));
  static constexpr std::array<std::string_view, 16> kExact = {
      "pybind11::module_::def",
      "pybind11::none::none",  // py::arg("bias") = py::none(): a default of None
      "pybind11::none::~none",
      "pybind11::arg::arg",
      "pybind11::arg::operator=",
      "pybind11::arg::noconvert",
      "pybind11::arg::none",
      "pybind11::arg_v::arg_v",
      "pybind11::arg_v::~arg_v",
      "pybind11::object::~object",
      "pybind11::handle::dec_ref",
      "pybind11::handle::inc_ref",
      "pybind11::gil_scoped_release::gil_scoped_release",
      "pybind11::gil_scoped_release::~gil_scoped_release",
      "pybind11::gil_scoped_acquire::gil_scoped_acquire",
      "pybind11::gil_scoped_acquire::~gil_scoped_acquire"};
  if (std::find(kExact.begin(), kExact.end(), path) != kExact.end()) return true;
  // Constructing and destroying one of pybind11's exceptions (not set_error, which sets the
  // interpreter's error indicator).
  for (std::string_view type : {"builtin_exception", "stop_iteration", "index_error", "key_error",
                                "value_error", "type_error", "buffer_error", "import_error",
                                "attribute_error", "cast_error", "reference_cast_error"}) {
    const std::string name = "pybind11::" + std::string(type) + "::" + std::string(type);
    const std::string destructor = "pybind11::" + std::string(type) + "::~" + std::string(type);
    if (path == name || path == destructor) return true;
  }
  return path == "pybind11::pybind11_fail";
}

bool is_python_c_api(std::string_view name) {
  return (starts(name, "Py") && name.size() > 2 && ((name[2] >= 'A' && name[2] <= 'Z') || name[2] == '_')) ||
         starts(name, "_Py");
}

bool under(const std::string& file, const std::vector<std::string>& roots) {
  if (file.empty() || file.front() != '/') return false;
  const std::string normal = std::filesystem::path(file).lexically_normal().string();
  for (std::string root : roots) {
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    if (root.empty()) continue;
    if (normal == root || starts(normal, root + "/")) return true;
  }
  return false;
}

// Names are the candidate's bytes (file names, function names): printable ASCII, cut.
std::string shown(std::string_view text, std::size_t cap = 160) {
  std::string out;
  for (char c : text.substr(0, cap)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > cap) out += "...";
  return out;
}

// "kernels/a.cpp:6" from a line table's (absolute) path.
std::string where(const SourceFrame& frame) {
  std::string_view file = frame.file;
  if (const std::size_t at = file.rfind("/kernels/"); at != std::string_view::npos) file.remove_prefix(at + 1);
  return shown(file.empty() ? "(a line without a file)" : file) + ":" + std::to_string(frame.line);
}

}  // namespace

bool reaches_python(std::string_view name) {
  if (is_python_c_api(name)) return true;
  // torch's Python objects of tensors (THPVariable_Wrap, THPVariable_Unpack, THPVariableClass):
  // the type casters in m.def's glue use them; from a candidate's line they hand it a PyObject.
  if (starts(name, "THP")) return true;
  if (!starts(name, "_Z")) return false;
  name.remove_prefix(2);
  if (const std::size_t digits = name.find_first_not_of("0123456789"); digits > 0 && digits != std::string_view::npos &&
      starts(name.substr(digits), "THP")) {
    return true;  // a free C++ function of torch's Python layer: _Z19THPVariable_Unpack...
  }
  if (starts(name, "Z")) name.remove_prefix(1);  // a local entity of a pybind11 function
  if (!starts(name, "N")) return false;
  name.remove_prefix(1);
  while (!name.empty() && std::string_view("KVrRO").find(name.front()) != std::string_view::npos) name.remove_prefix(1);
  return starts(name, "8pybind11");
}

std::optional<std::string> candidate_python_use(const PythonSite& site,
                                                const std::vector<std::string>& glue_roots) {
  for (std::size_t k = 0; k < site.frames.size(); ++k) {
    if (under(site.frames[k].file, glue_roots)) continue;
    // The deepest frame in the candidate's files; what it called is the reference itself (k = 0)
    // or the function inlined at that call site.
    const std::string& callee = k == 0 ? site.target : site.frames[k - 1].function;
    if (k == 0 && is_python_c_api(site.target)) {
      return where(site.frames[0]) + " uses " + shown(site.target) +
             ", Python's C API: a candidate's own code may not reach the interpreter (pybind11's "
             "registration glue may)";
    }
    if (registration_entry_point(callee, k == 0 ? std::string() : site.frames[k - 1].file)) return std::nullopt;
    const std::string through = k == 0 ? "" : " (" + shown(symbol_path(demangled(site.target))) + ")";
    return where(site.frames[k]) + " calls " + shown(symbol_path(demangled(callee))) +
           ", which reaches Python" + through +
           ": a candidate's own code may use pybind11 only to register its functions "
           "(module_::def, arg, gil_scoped_release)";
  }
  return std::nullopt;  // every frame is the glue's
}

std::vector<PythonSite> python_sites_of(std::string_view objdump_text) {
  std::vector<PythonSite> sites;
  for_each_python_reference(objdump_text, [&](std::string_view, const std::vector<SourceFrame>& location,
                                              const std::vector<std::string>& targets) {
    for (const std::string& target : targets) sites.push_back({target, location});
  });
  return sites;
}

std::string kept_objdump_lines(std::string_view text) {
  std::string out;
  const auto keep = [&](std::string_view line) {
    out.append(line);
    out.push_back('\n');
  };
  // Section headers (everything before the first disassembly), section starts and system calls.
  bool disassembly = false;
  for_each_line(text, [&](std::string_view line) {
    const LineKind kind = kind_of(line);
    if (kind == LineKind::kSection) disassembly = true;
    if (!disassembly || kind == LineKind::kSection) {
      keep(line);
    } else if (kind == LineKind::kInstruction) {
      const std::size_t tab = line.find('\t');
      const std::string_view insn = line.substr(tab + 1);
      if (starts(insn, "syscall") || starts(insn, "sysenter") || starts(insn, "int ")) keep(line);
    }
  });
  // Then each reference to Python with its whole location, after a symbol row that resets it.
  out += "Disassembly of section (references to Python):\n";
  for_each_python_reference(text, [&](std::string_view row, const std::vector<SourceFrame>& location,
                                      const std::vector<std::string>&) {
    keep("0000000000000000 <kept>:");
    if (!location[0].function.empty()) keep(location[0].function + "():");
    keep((location[0].file.empty() ? std::string("???") : location[0].file) + ":" + std::to_string(location[0].line));
    for (std::size_t k = 1; k < location.size(); ++k) {
      keep("inlined by " + (location[k].file.empty() ? std::string("???") : location[k].file) + ":" +
           std::to_string(location[k].line) + " (" + location[k].function + ")");
    }
    keep(row);
  });
  return out;
}

}  // namespace cudaagent
