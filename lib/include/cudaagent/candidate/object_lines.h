// Which source line of a candidate's object reaches Python (cudaagent(7), SANDBOX). The Python C
// API and pybind11 are allowed in the objects by name, because pybind11's registration glue,
// compiled into the same objects, calls them. The objects are compiled with line tables
// (-g1 -gdwarf-4: GCC 12's DWARF 5 is misread by binutils 2.40 in relocatable objects), and
// `objdump -d -l --inlines -r` names, for every reference to a Python or pybind11 symbol, the
// source line of the code and the chain of calls it was inlined through. A reference is the
// glue's when no frame of that chain lies in the candidate's own files; otherwise the deepest
// candidate frame must be a call of one of pybind11's registration entry points (module_::def,
// arg, arg_v, gil_scoped_*, an object's destructor, constructing pybind11's exceptions), and a reference
// made on a candidate line itself must be one of those entry points, never the C API.
//
// What it relies on: a line's file is the compiler's account of where the code came from, so
// `#line`, linemarkers and assembler line directives are refused in candidate sources (the
// source policy); the precompiled torch header puts pybind11's own code ahead of any macro the
// candidate defines. What it does not see: code that reaches the interpreter by reading memory it
// was given (a PyObject's type slots) references no Python symbol.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cudaagent {

// One frame of a reference's location: the code's own line (the first frame; `function` is the
// innermost function, inlined or not), then each call site it was inlined through, outwards
// (`function` is the caller holding that call site).
struct SourceFrame {
  std::string file;  // as the line table names it; empty when the object had no line for it
  int line = 0;
  std::string function;  // mangled when it has a linkage name, as objdump prints it
};

// A reference from an object's code to a symbol that reaches Python.
struct PythonSite {
  std::string target;               // the referenced symbol, mangled ("PySys_GetObject")
  std::vector<SourceFrame> frames;  // innermost first; never empty
};

// Python's C API (Py*, _Py*), torch's Python layer for tensors (THP*), or a pybind11 function
// or object (its mangled name in namespace pybind11). `name` is a relocation's or call's target as objdump prints it.
bool reaches_python(std::string_view name);

// Why the site is the candidate's own use of Python (a sentence naming the candidate's line and
// what it called), or nullopt when it is the glue's or a registration entry point. A file is
// the candidate's unless it lies under one of `glue_roots` (the toolchain's, torch's and Python's
// header folders); a frame without a file is the candidate's too.
std::optional<std::string> candidate_python_use(const PythonSite& site,
                                                const std::vector<std::string>& glue_roots);

// Every reference to a symbol that reaches Python in `objdump -d -l --inlines -r -w` output, with
// its location.
std::vector<PythonSite> python_sites_of(std::string_view objdump_text);

// The parts of `objdump -h -d -l --inlines -r -w --no-show-raw-insn` output the object check
// reads — section headers, system-call instructions and references to Python, each with its
// whole location — and nothing else, so the cache keeps kilobytes where the tool printed
// megabytes. Parsing the result gives the same facts as parsing `text`.
std::string kept_objdump_lines(std::string_view text);

}  // namespace cudaagent
