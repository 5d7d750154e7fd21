// Token-level scan: strips comments and literals, then looks for the qualified-call shape. No
// regular expressions are needed for a fixed prefix and an identifier.
#include "cudaagent/candidate/source_policy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string_view>

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

// `#line N "file"`, a GNU linemarker `# N "file"` (or either spelled with the digraph `%:`),
// as the directive's first token on a line of `code` (comments and literals blanked).
std::string line_directive_at(const std::string& code, std::size_t i) {
  std::size_t j = i;
  if (code[j] == '#') {
    ++j;
  } else if (code.compare(j, 2, "%:") == 0) {
    j += 2;
  } else {
    return {};
  }
  const auto skip_blanks = [&] {
    while (j < code.size() && (code[j] == ' ' || code[j] == '\t' ||
                               (code[j] == '\\' && j + 1 < code.size() && code[j + 1] == '\n'))) {
      j += code[j] == '\\' ? 2 : 1;
    }
  };
  skip_blanks();
  if (j < code.size() && std::isdigit(static_cast<unsigned char>(code[j])) != 0) return "linemarker";
  if (code.compare(j, 4, "line") == 0 && (j + 4 == code.size() || !is_identifier_char(code[j + 4]))) {
    return "#line";
  }
  return {};
}

bool has_word(const std::string& code, std::string_view word) {
  for (std::size_t at = code.find(word); at != std::string::npos; at = code.find(word, at + 1)) {
    const bool before = at == 0 || !is_identifier_char(code[at - 1]);
    const bool after = at + word.size() >= code.size() || !is_identifier_char(code[at + word.size()]);
    if (before && after) return true;
  }
  return false;
}

int line_of(const std::string& text, std::size_t at) {
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

}  // namespace

std::vector<SourceFinding> scan_line_directives(const std::map<std::string, std::string>& files) {
  std::vector<SourceFinding> findings;
  for (const auto& [name, bytes] : files) {
    if (!is_source(name)) continue;
    const std::string code = without_comments_and_literals(bytes);
    bool line_start = true;
    for (std::size_t i = 0; i < code.size(); ++i) {
      const char c = code[i];
      if (c == '\n') {
        line_start = true;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') continue;
      if (line_start) {
        if (std::string found = line_directive_at(code, i); !found.empty()) {
          findings.push_back({name, line_of(code, i), found});
        }
      }
      line_start = false;
    }
    // The assembler's own line directives, in a file that has inline assembly, and any section of
    // debugging information named anywhere (an array placed in .debug_line is a line table).
    if (const std::size_t at = bytes.find(".debug_"); at != std::string::npos) {
      findings.push_back({name, line_of(bytes, at), ".debug_ section"});
    }
    if (has_word(code, "asm") || has_word(code, "__asm__") || has_word(code, "__asm")) {
      for (const char* directive : {".loc", ".file", ".line", ".stabs", ".stabn"}) {
        for (std::size_t at = bytes.find(directive); at != std::string::npos; at = bytes.find(directive, at + 1)) {
          const std::size_t end = at + std::strlen(directive);
          if (end < bytes.size() && (bytes[end] == ' ' || bytes[end] == '\t')) {
            findings.push_back({name, line_of(bytes, at), std::string("assembler ") + directive});
            break;
          }
        }
      }
    }
  }
  return findings;
}

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
