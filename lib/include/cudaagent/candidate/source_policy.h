// A static filter over the candidate's C++/CUDA sources: calls of torch compute functions
// (torch::matmul(...), at::conv2d(...)) where only the candidate's own kernels may compute. It is a
// filter, not the defence (the attack catalog in tests/verify/): tensor methods and anything reached
// indirectly are caught at run time by the operator audit and, on the GPU, by kernel provenance.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace cudaagent {

struct SourceFinding {
  std::string file;
  int line = 0;
  std::string call;  // "torch::matmul"
};

// Scans every .cu/.cuh/.cpp/.h file of `files` (name -> bytes) for `at::NAME(` or `torch::NAME(`
// with NAME outside `allowed`. Comments and string literals are skipped.
std::vector<SourceFinding> scan_torch_calls(const std::map<std::string, std::string>& files,
                                            const std::set<std::string>& allowed);

// Directives that change the file or line the compiler records for the code after them, in every
// .cu/.cuh/.cpp/.h file of `files`: `#line`, GNU linemarkers (`# 12 "file"`), the assembler's
// .loc/.file/.line in a file with inline assembly, and any .debug_ section named. The object check
// attributes each reference to Python to a source line (object_lines.h); these would let a
// candidate's line pass for a header's. `call` is what was found ("#line", "linemarker", ...).
std::vector<SourceFinding> scan_line_directives(const std::map<std::string, std::string>& files);

// In a .cu file (and the candidate headers it includes, in order), an #include of torch's,
// pybind11's or Python's headers (or of binding_registry.h, or a computed #include) after a macro
// was defined, undefined or pushed: the macro would rewrite code that the object check counts as
// the glue's (object_lines.h). A .cpp file is compiled with the precompiled torch header ahead of
// its first line, so no macro of its own reaches those headers. `call` names the include and
// where the macro was.
std::vector<SourceFinding> scan_macros_before_python_headers(const std::map<std::string, std::string>& files);

// A candidate file that adds to pybind11's namespace (`namespace pybind11 {`, pybind11's own
// PYBIND11_NAMESPACE macros, a namespace named by a macro or a macro call): code there would read
// as pybind11's own to the binding-signature check (binding_signatures.h). `using namespace` and
// aliases are fine. `call` says what was found.
std::vector<SourceFinding> scan_pybind11_namespace(const std::map<std::string, std::string>& files);

// The default allowed names: allocation, options, types and namespaces.
std::set<std::string> default_allowed_torch_calls();

}  // namespace cudaagent
