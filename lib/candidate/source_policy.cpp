// Token-level scan: strips comments and literals, then looks for the qualified-call shape. No
// regular expressions are needed for a fixed prefix and an identifier.
#include "cudaagent/candidate/source_policy.h"

#include <algorithm>
#include <array>
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

// The assembler's directives that set line information, define assembler macros (which can build
// any other directive's name), include files, or move code within or into a text section (code
// appended to a header function's section would read as that function's lines): in a file with
// inline assembly they could rewrite what the object check reads. Data sections stay allowed, and
// PTX's own directives (.reg, .pred, state spaces inside mnemonics) are none of these.
std::string assembler_directive_in(std::string_view text) {
  static constexpr std::array<std::string_view, 20> kNames = {
      "loc", "file", "line", "stabs", "stabn", "stabd", "macro", "irp", "irpc", "rept",
      "altmacro", "purgem", "include", "subsection", "org", "set", "equ", "equiv", "symver", "text"};
  for (std::size_t i = text.find('.'); i != std::string_view::npos; i = text.find('.', i + 1)) {
    if (i > 0 && is_identifier_char(text[i - 1])) continue;
    std::size_t end = i + 1;
    while (end < text.size() && is_identifier_char(text[end])) ++end;
    const std::string_view word = text.substr(i + 1, end - i - 1);
    if (std::find(kNames.begin(), kNames.end(), word) != kNames.end()) return "." + std::string(word);
    if (word == "section" || word == "pushsection") {
      std::size_t arg = end;
      while (arg < text.size() && (text[arg] == ' ' || text[arg] == '\t' || text[arg] == '"' || text[arg] == '\\')) ++arg;
      if (text.substr(arg, 5) == ".text") return "." + std::string(word) + " .text";
    }
  }
  return {};
}

// The contents of a file's string literals as the compiler sees them: escapes decoded, adjacent
// literals joined, raw strings whole. Comments and character literals are skipped.
std::vector<std::string> string_literals(const std::string& text) {
  std::vector<std::string> out;
  bool joinable = false;  // only blanks since the last literal ended
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      const std::size_t close = text.find("*/", i + 2);
      i = close == std::string::npos ? text.size() : close + 2;
      continue;
    }
    if (c == '\'') {  // a character literal
      for (++i; i < text.size() && text[i] != '\'' && text[i] != '\n'; ++i) {
        if (text[i] == '\\') ++i;
      }
      ++i;
      joinable = false;
      continue;
    }
    if (c != '"') {
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && !(c == 'R' || c == 'u' || c == 'U' || c == 'L' || c == '8')) {
        joinable = false;
      }
      ++i;
      continue;
    }
    std::string value;
    if (i > 0 && text[i - 1] == 'R') {  // R"delim( ... )delim"
      const std::size_t open = text.find('(', i);
      const std::string close = ")" + text.substr(i + 1, open == std::string::npos ? 0 : open - i - 1) + "\"";
      const std::size_t end = open == std::string::npos ? std::string::npos : text.find(close, open);
      value = text.substr(open == std::string::npos ? i : open + 1,
                          end == std::string::npos ? std::string::npos : end - open - 1);
      i = end == std::string::npos ? text.size() : end + close.size();
    } else {
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i) {
        if (text[i] != '\\' || i + 1 >= text.size()) {
          value.push_back(text[i]);
          continue;
        }
        const char e = text[++i];
        if (e == 'x') {
          unsigned v = 0;
          while (i + 1 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) != 0) {
            v = v * 16 + static_cast<unsigned>(std::stoi(std::string(1, text[++i]), nullptr, 16));
          }
          value.push_back(static_cast<char>(v & 0xff));
        } else if (e >= '0' && e <= '7') {
          unsigned v = static_cast<unsigned>(e - '0');
          for (int k = 0; k < 2 && i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '7'; ++k) {
            v = v * 8 + static_cast<unsigned>(text[++i] - '0');
          }
          value.push_back(static_cast<char>(v & 0xff));
        } else {
          const std::string_view from = "ntrabfv", to = "\n\t\r\a\b\f\v";
          const std::size_t k = from.find(e);
          value.push_back(k == std::string_view::npos ? e : to[k]);
        }
      }
      ++i;
    }
    if (joinable && !out.empty()) {
      out.back() += value;
    } else {
      out.push_back(std::move(value));
    }
    joinable = true;
  }
  return out;
}

// `.previous` and `.popsection` return to the section before the last switch: after one of the
// statement's own `.section`/`.pushsection` that is the function's own section, before any it is
// whatever section the compiler used last (a header function's, perhaps).
std::string unbalanced_section_return(std::string_view statement) {
  int switches = 0, pushes = 0;
  for (std::size_t i = statement.find('.'); i != std::string_view::npos; i = statement.find('.', i + 1)) {
    if (i > 0 && is_identifier_char(statement[i - 1])) continue;
    std::size_t end = i + 1;
    while (end < statement.size() && is_identifier_char(statement[end])) ++end;
    const std::string_view word = statement.substr(i + 1, end - i - 1);
    if (word == "section") ++switches;
    if (word == "pushsection") ++pushes, ++switches;
    if (word == "previous" && switches == 0) return ".previous";
    if (word == "popsection" && pushes-- == 0) return ".popsection";
  }
  return {};
}

// A file with inline assembly: no line, macro or text-section directive of the assembler,
// written out, escaped or split across literals; section returns only after the statement's own
// switch; and no token pasting to build a directive.
void scan_assembly_file(const std::string& name, const std::string& bytes, std::vector<SourceFinding>& findings) {
  if (const std::string found = assembler_directive_in(bytes); !found.empty()) {
    findings.push_back({name, line_of(bytes, bytes.find(found)), "assembler " + found});
    return;
  }
  // Outside any literal (a stringified macro argument, say), a section return has no switch.
  const std::string code = without_comments_and_literals(bytes);
  for (const char* back : {".previous", ".popsection"}) {
    if (const std::size_t at = code.find(back); at != std::string::npos) {
      findings.push_back({name, line_of(bytes, at), std::string("assembler ") + back + " outside a string"});
      return;
    }
  }
  for (const std::string& literal : string_literals(bytes)) {
    std::string found = assembler_directive_in(literal);
    if (found.empty()) found = unbalanced_section_return(literal);
    if (!found.empty()) {
      findings.push_back({name, 1, "assembler " + found + " (in a string)"});
      return;
    }
  }
  for (const char* paste : {"##", "%:%:"}) {
    if (const std::size_t at = bytes.find(paste); at != std::string::npos) {
      findings.push_back({name, line_of(bytes, at), "token pasting (##) beside inline assembly"});
      return;
    }
  }
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
    // GCC documents that an `artificial` function's inlined code may take its caller's lines: a
    // lambda so marked and inlined into pybind11's dispatcher could read as the dispatcher's.
    for (std::string_view word : {"artificial", "__artificial__"}) {
      if (has_word(code, word)) {
        findings.push_back({name, line_of(code, code.find(word)), "the artificial attribute"});
        break;
      }
    }
    // The assembler's own line directives, in a file that has inline assembly, and any section of
    // debugging information named anywhere (an array placed in .debug_line is a line table).
    if (const std::size_t at = bytes.find(".debug_"); at != std::string::npos) {
      findings.push_back({name, line_of(bytes, at), ".debug_ section"});
    }
    if (has_word(code, "asm") || has_word(code, "__asm__") || has_word(code, "__asm")) {
      scan_assembly_file(name, bytes, findings);
    }
  }
  return findings;
}

namespace {

// One preprocessing directive of a candidate file: its name ("define", "include", ...) and the
// rest of its (continued) line, read from the raw bytes where the comment-free text has one.
struct Directive {
  std::string name;
  std::string rest;
  int line = 0;
};

std::vector<Directive> directives_of(const std::string& bytes) {
  const std::string code = without_comments_and_literals(bytes);
  std::vector<Directive> out;
  std::size_t start = 0;
  int line = 1;
  while (start < code.size()) {
    std::size_t end = start;
    int lines = 1;
    // A directive's line runs on past a backslash-newline.
    while (end < code.size() && code[end] != '\n') {
      if (code[end] == '\\' && end + 1 < code.size() && code[end + 1] == '\n') {
        end += 2;
        ++lines;
        continue;
      }
      ++end;
    }
    std::size_t i = code.find_first_not_of(" \t\r\f\v", start);
    if (i != std::string::npos && i < end && (code[i] == '#' || code.compare(i, 2, "%:") == 0)) {
      i += code[i] == '#' ? 1 : 2;
      std::string raw = bytes.substr(i, end - i);
      std::string joined;
      for (std::size_t k = 0; k < raw.size(); ++k) {
        if (raw[k] == '\\' && k + 1 < raw.size() && raw[k + 1] == '\n') {
          ++k;
          continue;
        }
        joined.push_back(raw[k]);
      }
      std::size_t n = joined.find_first_not_of(" \t");
      std::size_t e = n;
      while (e < joined.size() && is_identifier_char(joined[e])) ++e;
      if (n != std::string::npos) {
        Directive d{joined.substr(n, e - n), joined.substr(e), line};
        const std::size_t first = d.rest.find_first_not_of(" \t");
        d.rest = first == std::string::npos ? "" : d.rest.substr(first);
        out.push_back(std::move(d));
      }
    }
    line += lines;
    start = end + 1;
  }
  return out;
}

// Headers whose code references Python: torch's, pybind11's, Python's, and the registration
// header that includes pybind11. A computed include (#include MACRO) counts too.
bool python_header(const std::string& rest) {
  if (rest.empty() || (rest[0] != '<' && rest[0] != '"')) return true;
  const std::size_t close = rest.find(rest[0] == '<' ? '>' : '"', 1);
  const std::string name = rest.substr(1, close == std::string::npos ? std::string::npos : close - 1);
  for (const char* prefix : {"torch/", "pybind11/", "Python.h", "python3", "binding_registry.h"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// The candidate header a quoted include names, when it is one of `files` (all in kernels/).
std::string candidate_header(const std::string& rest, const std::map<std::string, std::string>& files) {
  if (rest.empty() || rest[0] != '"') return {};
  const std::size_t close = rest.find('"', 1);
  std::string name = rest.substr(1, close == std::string::npos ? std::string::npos : close - 1);
  name = name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
  return files.count("kernels/" + name) != 0 ? "kernels/" + name : std::string();
}

// The name a #define defines; empty for any other directive.
std::string defined_name(const Directive& d) {
  if (d.name != "define") return "";
  std::size_t e = 0;
  while (e < d.rest.size() && is_identifier_char(d.rest[e])) ++e;
  return d.rest.substr(0, e);
}

// A macro that can change code it is expanded in: a non-empty #define (an empty object-like one,
// an include guard, only removes a token), #undef, or #pragma push_macro/pop_macro.
bool macro_change(const Directive& d) {
  if (d.name == "undef") return true;
  if (d.name == "pragma") return d.rest.find("push_macro") != std::string::npos || d.rest.find("pop_macro") != std::string::npos;
  if (d.name != "define") return false;
  const std::size_t e = defined_name(d).size();
  if (e < d.rest.size() && d.rest[e] == '(') return true;
  return d.rest.find_first_not_of(" \t\r", e) != std::string::npos;
}

struct MacroScan {
  const std::map<std::string, std::string>& files;
  std::string first_macro;  // "kernels/a.cu:3", once one is seen
  std::vector<SourceFinding> findings;
  std::set<std::string> open;  // the include stack, against cycles

  void walk(const std::string& name, int depth) {
    if (depth > 16 || !open.insert(name).second) return;
    const auto file = files.find(name);
    if (file != files.end()) {
      for (const Directive& d : directives_of(file->second)) {
        if (macro_change(d) && first_macro.empty()) first_macro = name + ":" + std::to_string(d.line);
        if (d.name != "include" && d.name != "include_next" && d.name != "import") continue;
        if (const std::string header = candidate_header(d.rest, files); !header.empty()) {
          walk(header, depth + 1);
        } else if (!first_macro.empty() && python_header(d.rest)) {
          findings.push_back({name, d.line, "#include " + d.rest.substr(0, 60) + " after the macro at " + first_macro});
        }
      }
    }
    open.erase(name);
  }
};

}  // namespace

std::vector<SourceFinding> scan_pybind11_namespace(const std::map<std::string, std::string>& files) {
  // The macros the candidate's files define: a namespace named through one could be pybind11's.
  std::set<std::string> macros;
  for (const auto& [name, bytes] : files) {
    if (!is_source(name)) continue;
    for (const Directive& d : directives_of(bytes)) {
      if (std::string macro = defined_name(d); !macro.empty()) macros.insert(std::move(macro));
    }
  }
  std::vector<SourceFinding> findings;
  for (const auto& [name, bytes] : files) {
    if (!is_source(name)) continue;
    const std::string code = without_comments_and_literals(bytes);
    std::string found;
    std::size_t where = std::string::npos;
    for (std::string_view word : {"PYBIND11_NAMESPACE", "PYBIND11_NAMESPACE_BEGIN"}) {
      if (found.empty() && has_word(code, word)) {
        found = "pybind11's namespace macro " + std::string(word);
        where = code.find(word);
      }
    }
    // `namespace NAME {` (not `using namespace`, not an alias `namespace a = b;`) whose name
    // holds pybind11, or a macro, or a macro call.
    for (std::size_t at = code.find("namespace"); found.empty() && at != std::string::npos;
         at = code.find("namespace", at + 1)) {
      if ((at > 0 && is_identifier_char(code[at - 1])) ||
          (at + 9 < code.size() && is_identifier_char(code[at + 9]))) {
        continue;
      }
      std::size_t before = code.find_last_not_of(" \t\r\n", at == 0 ? 0 : at - 1);
      if (at > 0 && before != std::string::npos && before >= 4 && code.compare(before - 4, 5, "using") == 0) continue;
      const std::size_t end = code.find_first_of("{=;", at + 9);
      if (end == std::string::npos || code[end] != '{') continue;
      const std::string head = code.substr(at + 9, end - at - 9);
      bool refused = head.find('(') != std::string::npos;
      for (std::size_t i = 0; i < head.size() && !refused;) {
        if (!is_identifier_char(head[i])) {
          ++i;
          continue;
        }
        std::size_t j = i;
        while (j < head.size() && is_identifier_char(head[j])) ++j;
        const std::string word = head.substr(i, j - i);
        refused = word == "pybind11" || macros.count(word) != 0;
        i = j;
      }
      if (refused) {
        found = "namespace" + head.substr(0, head.find_last_not_of(" \t\r\n") + 1);
        where = at;
      }
    }
    if (!found.empty()) findings.push_back({name, line_of(code, where), found});
  }
  return findings;
}

std::vector<SourceFinding> scan_macros_before_python_headers(const std::map<std::string, std::string>& files) {
  std::vector<SourceFinding> findings;
  for (const auto& [name, bytes] : files) {
    if (!name.ends_with(".cu")) continue;
    MacroScan scan{files, {}, {}, {}};
    scan.walk(name, 0);
    findings.insert(findings.end(), scan.findings.begin(), scan.findings.end());
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
