// Token-level scan: strips comments and literals, then looks for the qualified-call shape. No
// regular expressions are needed for a fixed prefix and an identifier.
#include "cudaagent/candidate/source_policy.h"

#include <cctype>

namespace cudaagent {
namespace {

bool is_source(const std::string& name) {
  for (const char* suffix : {".cu", ".cuh", ".cpp", ".h", ".hpp", ".cc"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

// Replaces comments and string/char literals by spaces, keeping newlines (so line numbers hold).
std::string without_comments_and_literals(const std::string& text) {
  std::string out = text;
  enum { kCode, kLine, kBlock, kString, kChar } state = kCode;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    switch (state) {
      case kCode:
        if (c == '/' && next == '/') state = kLine;
        else if (c == '/' && next == '*') state = kBlock;
        else if (c == '"') state = kString;
        else if (c == '\'') state = kChar;
        else continue;
        out[i] = ' ';
        break;
      case kLine:
        if (c == '\n') state = kCode;
        else out[i] = ' ';
        break;
      case kBlock:
        if (c == '*' && next == '/') {
          out[i] = out[i + 1] = ' ';
          ++i;
          state = kCode;
        } else if (c != '\n') {
          out[i] = ' ';
        }
        break;
      case kString:
      case kChar:
        if (c == '\\' && next != '\0') {
          out[i] = ' ';
          if (next != '\n') out[i + 1] = ' ';
          ++i;
        } else {
          if ((state == kString && c == '"') || (state == kChar && c == '\'')) state = kCode;
          if (c != '\n') out[i] = ' ';
        }
        break;
    }
  }
  return out;
}

bool is_identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

}  // namespace

std::set<std::string> default_allowed_torch_calls() {
  return {"empty",      "empty_like", "empty_strided", "zeros",        "zeros_like",
          "Tensor",     "TensorOptions", "dtype",      "device",       "Device",
          "IntArrayRef", "ScalarType", "Scalar",       "Half",         "BFloat16",
          "cuda",       "kCUDA",      "kCPU",          "kFloat",       "kFloat32",
          "kHalf",      "kBFloat16",  "kInt",          "kLong",        "kDouble",
          "kByte",      "kBool",      "kInt32",        "kInt64",       "kFloat16",
          "requires_grad", "DeviceGuard", "OptionalDeviceGuard", "CUDAGuard", "OptionalCUDAGuard",
          "globalContext", "detail",  "native",        "check",        "MemoryFormat",
          "parallel_for"};  // threads, not compute: the object check names them (thread-creation)
}

std::vector<SourceFinding> scan_torch_calls(const std::map<std::string, std::string>& files,
                                            const std::set<std::string>& allowed) {
  std::vector<SourceFinding> findings;
  for (const auto& [name, bytes] : files) {
    if (!is_source(name)) continue;
    const std::string code = without_comments_and_literals(bytes);
    int line = 1;
    for (std::size_t i = 0; i < code.size(); ++i) {
      if (code[i] == '\n') {
        ++line;
        continue;
      }
      for (const std::string prefix : {"at::", "torch::"}) {
        if (code.compare(i, prefix.size(), prefix) != 0) continue;
        if (i > 0 && (is_identifier_char(code[i - 1]) || code[i - 1] == ':')) continue;
        std::size_t end = i + prefix.size();
        while (end < code.size() && is_identifier_char(code[end])) ++end;
        const std::string identifier = code.substr(i + prefix.size(), end - i - prefix.size());
        std::size_t after = end;
        while (after < code.size() && (code[after] == ' ' || code[after] == '\t')) ++after;
        if (!identifier.empty() && after < code.size() && code[after] == '(' &&
            allowed.count(identifier) == 0) {
          findings.push_back({name, line, prefix + identifier});
        }
      }
    }
  }
  return findings;
}

}  // namespace cudaagent
