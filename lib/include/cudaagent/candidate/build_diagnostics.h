// What a candidate is shown of its compilers' output (cudaagent(7), SANDBOX). Compilers quote the
// source lines of whatever file they report on, so an `#include "/etc/shadow"` would print the
// first line of a file the agent cannot read. Key choice: the output is filtered line by line to
// what refers to the workspace's own files or to public headers, and a quoted source line is kept
// only when it is byte-for-byte the workspace file's line it claims to be; the compilers also run
// in the sandbox, where no such file is readable. Both are needed: the filter alone cannot see a
// value the compiler computed from a file and printed at a workspace line.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cudaagent {

struct DiagnosticScope {
  // The folder the compilers ran in and were given the sources from (absolute, no trailing '/').
  std::string workspace_dir;
  // The workspace's files, relative name -> bytes (the snapshot and the pristine protected files):
  // a quoted line is checked against these bytes, never against the disk.
  std::map<std::string, std::string> files;
  // Folders any process in the sandbox may read (system headers, the CUDA Toolkit, torch's and
  // Python's headers): diagnostics located there are kept, their quoted lines are not.
  std::vector<std::string> public_roots;
};

// The lines of `log` (a compiler's stdout and stderr) that the agent may see:
//   * a diagnostic located in a workspace file or under a public root ("f:12:5: error: m",
//     "f(12): error: m", "In file included from f:3:", "f: In function 'g':", nvcc's "detected
//     during ... at line N of f"); paths are resolved against workspace_dir and normalised first,
//     so "kernels/../../secret" is not a workspace file;
//   * gcc's "N | text" and nvcc's indented quote, only right after a workspace location and only
//     when text is that file's line (tabs expanded to 8 columns), and caret lines made of ' ', '|',
//     '^', '~' alone;
//   * lines a compiler or linker writes about itself ("cc1plus: ...", "nvcc error   : ...",
//     "compilation terminated.", "N errors detected in the compilation of ...").
// A diagnostic located anywhere else becomes one line "PATH:N: (diagnostic in a file outside the
// workspace; not shown)" and everything after it up to the next kept diagnostic is dropped, as is
// any other line. At most `max_bytes` are returned (then "...\n"). Pure function; thread-safe.
std::string filter_compiler_output(std::string_view log, const DiagnosticScope& scope,
                                   std::size_t max_bytes = 256 * 1024);

// Whether `line` is one a compiler driver, one of its children or the linker writes about itself:
// it begins with the program's name and then ':' or ' ' ("cc1plus: out of memory allocating ...",
// "g++: fatal error: Killed signal terminated program cc1plus", "nvcc error   : ...",
// "/usr/bin/ld: ..."). Diagnostics about code begin with a path instead.
bool is_compiler_tool_line(std::string_view line);

// The first `max_errors` compiler errors of `log` as "file:line: message" lines, with
// `strip_prefix` removed from paths. Understands gcc/clang ("f:12:5: error: m") and nvcc
// ("f(12): error: m"). Give it filtered output: it copies error lines as they are.
std::string trim_diagnostics(const std::string& log, const std::string& strip_prefix,
                             std::size_t max_errors = 8);

// The first `max_lines` warning lines of a successful compile (gcc ": warning:", nvcc
// "warning #"), with `strip_prefix` removed: what the agent may want to fix next.
std::string warning_lines(const std::string& log, const std::string& strip_prefix,
                          std::size_t max_lines);

}  // namespace cudaagent
