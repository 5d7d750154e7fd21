// The naming and classification rules of workspace snapshots (workspace_names.h): which names
// are refused, which files are the candidate's, which could be code and which are unused.
#include "workspace_names.h"

#include <algorithm>
#include <cstdio>

namespace cudaagent::workspace_names {

// Untrusted names go into findings that people read on a terminal: escape control bytes, non-ASCII
// and backslashes, and cut very long names.
std::string printable(std::string_view text) {
  constexpr std::size_t kMaxShown = 200;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  if (text.size() > kMaxShown) out += "...";
  return out;
}

// ---- Names ------------------------------------------------------------------------------------

bool is_stem_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_name_char(char c) { return is_stem_char(c) || c == '.' || c == '-'; }

// Hidden folders (.git, .ipynb_checkpoints) and caches (__pycache__) are tool droppings: skipped,
// never read, never used. Hidden files are treated the same way.
bool is_hidden(std::string_view component) {
  return (component.size() > 1 && component[0] == '.' && component != "..") ||
         component == "__pycache__";
}

// Why a path component is refused whatever the entry is, or empty when it is fine.
std::string hard_name_problem(std::string_view component, std::size_t max_name_bytes) {
  if (component.empty()) return "empty path component";
  if (component == "." || component == "..") return "'.' and '..' are not allowed";
  if (component.size() > max_name_bytes) {
    return "name longer than " + std::to_string(max_name_bytes) + " bytes";
  }
  if (component[0] == '-') return "name starts with '-'";
  if (component[0] == '.') return "name starts with '.'";
  for (char c : component) {
    if (c == '\0') return "name contains a NUL byte";
    if (c == '\\') return "name contains a backslash";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "name contains a control byte";
  }
  return {};
}

// Why a component is refused in a name that is used or could mean code (see workspace.h).
std::string strict_name_problem(std::string_view component) {
  for (char c : component) {
    if (!is_name_char(c)) return "name has a byte outside [A-Za-z0-9._-]";
  }
  return {};
}

// Both checks, for names that must be plain whatever they are (materialize, protected files).
std::string name_problem(std::string_view component, std::size_t max_name_bytes) {
  std::string problem = hard_name_problem(component, max_name_bytes);
  return problem.empty() ? strict_name_problem(component) : problem;
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = path.find('/', start);
    parts.push_back(path.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) return parts;
    start = slash + 1;
  }
}

// The extension, lower case, after trailing spaces and dots are dropped ("k.CU " -> "cu").
std::string lower_extension(std::string_view name) {
  while (!name.empty() && (name.back() == ' ' || name.back() == '.')) name.remove_suffix(1);
  const std::size_t dot = name.rfind('.');
  std::string ext(dot == std::string_view::npos ? std::string_view() : name.substr(dot + 1));
  for (char& c : ext) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return ext;
}

// ---- Classification ----------------------------------------------------------------------------

// The candidate's files, as in the CUDA Agent workspace: model_new.py, and kernels/<stem>.cu | .cuh
// | .h | .cpp. A plain .cpp is allowed because CUDA Agent's SKILL.md asks for cuBLAS/cuDNN calls in
// kernels/*.cpp beside the *_binding.cpp files; every .cpp goes to the host compiler either way.
bool is_candidate_file(std::string_view path) {
  if (path == "model_new.py") return true;
  constexpr std::string_view kDir = "kernels/";
  if (path.substr(0, kDir.size()) != kDir) return false;
  const std::string_view name = path.substr(kDir.size());
  const std::size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return false;
  const std::string_view stem = name.substr(0, dot);
  const std::string_view ext = name.substr(dot + 1);
  if (!std::all_of(stem.begin(), stem.end(), is_stem_char)) return false;
  return ext == "cu" || ext == "cuh" || ext == "h" || ext == "cpp";
}

// A prefix ending in '/' names a folder and everything in it; any other names one entry (file or
// folder). Matching is by whole components, so "SKILL.md" does not cover "SKILL.mdx".
bool matches_prefix(std::string_view path, bool is_dir, const std::vector<std::string>& prefixes) {
  for (const std::string& prefix : prefixes) {
    if (prefix.empty()) continue;
    if (prefix.back() == '/') {
      const std::string as_dir = std::string(path) + "/";
      if (std::string_view(is_dir ? as_dir : path).substr(0, prefix.size()) == prefix) return true;
    } else if (path == prefix ||
               (path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix &&
                path[prefix.size()] == '/')) {
      return true;
    }
  }
  return false;
}

// What CUDA Agent's own compile script leaves in a workspace (build/forced_compile/ and the
// cuda_extension.so copied to the root). Never used here, so they must not turn an honest CUDA
// Agent workspace into a policy rejection.
bool is_build_output(std::string_view path, bool is_dir) {
  if (is_dir) return path == "build";
  if (path.substr(0, 6) == "build/") return true;
  return path.find('/') == std::string_view::npos && path.substr(0, 14) == "cuda_extension" &&
         lower_extension(path) == "so";
}

// Why a file that is neither a candidate nor a protected file could run code or change the build or
// the import, or empty when it is inert (notes, logs, data).
std::string unexpected_reason(std::string_view path) {
  const std::vector<std::string_view> parts = split_path(path);
  const std::string_view name = parts.back();
  const std::string ext = lower_extension(name);
  if (name == "sitecustomize.py" || name == "usercustomize.py") {
    return "Python runs this at start-up";
  }
  if (name == "__init__.py" && parts.size() > 1) {
    return "makes '" + std::string(parts[parts.size() - 2]) + "/' an importable Python package";
  }
  if (ext == "pth") return "Python path configuration file";
  if (ext == "py" || ext == "pyw" || ext == "pyc" || ext == "pyo" || ext == "pyd") {
    return "Python file other than model_new.py";
  }
  if (ext == "so" || ext == "dylib" || ext == "dll" ||
      name.find(".so.") != std::string_view::npos || ext == "o" || ext == "obj" || ext == "a" ||
      ext == "ptx" || ext == "cubin" || ext == "fatbin") {
    return "compiled code";
  }
  static constexpr std::string_view kSources[] = {"c",   "cc",  "cp",  "cpp", "cxx", "c++",
                                                  "cu",  "cuh", "h",   "hh",  "hpp", "hxx",
                                                  "h++", "inc", "inl", "ipp", "tcc", "tpp"};
  if (std::find(std::begin(kSources), std::end(kSources), ext) != std::end(kSources)) {
    return "source outside the allowed names (model_new.py, kernels/<stem>.cu|.cuh|.h|.cpp)";
  }
  return {};
}

// For an entry that passed the name checks and is not skipped.
Classified classify_file(std::string_view path, const ProtectedFiles& protected_files) {
  if (protected_files.pristine.count(std::string(path)) != 0) return {Use::kProtected, {}};
  if (is_candidate_file(path)) return {Use::kCandidate, {}};
  std::string reason = unexpected_reason(path);
  if (!reason.empty()) return {Use::kUnexpected, std::move(reason)};
  return {Use::kIgnored, {}};
}

}  // namespace cudaagent::workspace_names
