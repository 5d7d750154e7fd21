// The compiler-output filter (build_diagnostics.h): one pass over the lines with a small state
// machine. The state is where the last kept diagnostic was located; a quoted line is kept only
// right after a workspace location and only when it is that file's own line, so a diagnostic in a
// hidden file cannot lend its quote to a line the candidate forged (a static_assert message may
// hold a newline and imitate a located line).
#include "cudaagent/candidate/build_diagnostics.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim_right(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

// A file's line `number` (1-based) with tabs expanded to 8 columns, as gcc prints it; nullopt past
// the end.
std::optional<std::string> file_line(const std::string& bytes, long number) {
  if (number < 1) return std::nullopt;
  std::size_t start = 0;
  for (long i = 1; i < number; ++i) {
    const std::size_t end = bytes.find('\n', start);
    if (end == std::string::npos) return std::nullopt;
    start = end + 1;
  }
  if (start > bytes.size()) return std::nullopt;
  std::size_t end = bytes.find('\n', start);
  if (end == std::string::npos) end = bytes.size();
  std::string out;
  for (char c : std::string_view(bytes).substr(start, end - start)) {
    if (c == '\t') {
      out.append(8 - out.size() % 8, ' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

bool same_text(std::string_view quoted, const std::optional<std::string>& line) {
  return line && trim_right(quoted) == trim_right(*line);
}

long parse_number(std::string_view digits) {
  long value = 0;
  for (char c : digits) {
    if (!is_digit(c) || value > 100000000) return -1;
    value = value * 10 + (c - '0');
  }
  return digits.empty() ? -1 : value;
}

enum class Style { kGcc, kNvcc };

struct Located {
  std::string path;
  long line = 0;  // 0 when the location has no line ("f: In function 'g':")
  Style style = Style::kGcc;
  std::string kind;  // "error", "warning", "note", ... or empty
};

// "PATH:LINE[:COL]: rest" -> {PATH, LINE}; "PATH: In ...", "PATH: At ..." -> {PATH, 0};
// "PATH(LINE): rest" (nvcc) -> {PATH, LINE}.
std::optional<Located> parse_location(std::string_view line) {
  if (line.empty() || line[0] == ' ') return std::nullopt;
  // nvcc: "(" digits "): ", the first such.
  for (std::size_t close = line.find("): "); close != std::string_view::npos;
       close = line.find("): ", close + 1)) {
    const std::size_t open = line.rfind('(', close);
    if (open == std::string_view::npos || open == 0) continue;
    const long number = parse_number(line.substr(open + 1, close - open - 1));
    if (number <= 0) continue;
    Located out{std::string(line.substr(0, open)), number, Style::kNvcc, {}};
    const std::string_view rest = line.substr(close + 3);
    out.kind = std::string(rest.substr(0, rest.find_first_of(" :#")));
    return out;
  }
  // gcc: the first ":" followed by digits and ":".
  for (std::size_t colon = line.find(':'); colon != std::string_view::npos;
       colon = line.find(':', colon + 1)) {
    if (colon == 0) return std::nullopt;
    const std::string_view after = line.substr(colon + 1);
    if (after.substr(0, 4) == " In " || after.substr(0, 4) == " At ") {
      return Located{std::string(line.substr(0, colon)), 0, Style::kGcc, {}};
    }
    std::size_t digits = 0;
    while (digits < after.size() && is_digit(after[digits])) ++digits;
    if (digits == 0 || digits == after.size() || after[digits] != ':') continue;
    Located out{std::string(line.substr(0, colon)), parse_number(after.substr(0, digits)),
                Style::kGcc, {}};
    std::string_view rest = after.substr(digits + 1);
    std::size_t column = 0;
    while (column < rest.size() && is_digit(rest[column])) ++column;
    if (column > 0 && column < rest.size() && rest[column] == ':') rest.remove_prefix(column + 1);
    if (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
    for (std::string_view kind : {"fatal error", "error", "warning", "note"}) {
      if (rest.substr(0, kind.size()) == kind) out.kind = std::string(kind);
    }
    return out;
  }
  return std::nullopt;
}

// "In file included from PATH:N[:M][,:]" and "                 from PATH:N[:M][,:]".
std::optional<std::string> parse_include_trail(std::string_view line) {
  std::string_view rest;
  if (line.substr(0, 22) == "In file included from ") {
    rest = line.substr(22);
  } else {
    const std::size_t first = line.find_first_not_of(' ');
    if (first == 0 || first == std::string_view::npos || line.substr(first, 5) != "from ") {
      return std::nullopt;
    }
    rest = line.substr(first + 5);
  }
  const auto at = parse_location(std::string(rest) + ": x");
  if (!at) return std::nullopt;
  return at->path;
}

// nvcc's template context: "... at line N of PATH" (or "at line N" in the current file).
struct Context {
  long line = 0;
  std::optional<std::string> path;
};
std::optional<Context> parse_context(std::string_view line) {
  if (line.empty() || line[0] != ' ') return std::nullopt;
  const std::size_t at = line.rfind(" at line ");
  if (at == std::string_view::npos) {
    const std::size_t first = line.find_first_not_of(' ');
    if (first != std::string_view::npos && trim_right(line.substr(first)) == "detected during:") {
      return Context{};
    }
    return std::nullopt;
  }
  std::string_view rest = line.substr(at + 9);
  std::size_t digits = 0;
  while (digits < rest.size() && is_digit(rest[digits])) ++digits;
  Context out{parse_number(rest.substr(0, digits)), std::nullopt};
  if (out.line <= 0) return std::nullopt;
  rest = trim_right(rest.substr(digits));
  if (rest.substr(0, 4) == " of ") out.path = std::string(rest.substr(4));
  return out;
}

bool is_caret_line(std::string_view line, Style style) {
  if (style == Style::kGcc) {
    const std::size_t bar = line.find('|');
    if (bar == std::string_view::npos) return false;
    if (line.substr(0, bar).find_first_not_of(' ') != std::string_view::npos) return false;
    const std::string_view rest = line.substr(bar + 1);
    return rest.find_first_not_of(" ^~|") == std::string_view::npos;
  }
  return !line.empty() && line.find_first_not_of(" ^~") == std::string_view::npos &&
         line.find('^') != std::string_view::npos;
}

// gcc's "   12 | text" -> {12, text}.
std::optional<std::pair<long, std::string_view>> parse_gcc_quote(std::string_view line) {
  const std::size_t first = line.find_first_not_of(' ');
  if (first == std::string_view::npos || !is_digit(line[first])) return std::nullopt;
  std::size_t end = first;
  while (end < line.size() && is_digit(line[end])) ++end;
  if (line.substr(end, 2) != " |") return std::nullopt;
  std::string_view text = line.substr(end + 2);
  if (!text.empty() && text[0] == ' ') text.remove_prefix(1);
  return std::make_pair(parse_number(line.substr(first, end - first)), text);
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// "1 error detected in the compilation of ...", "compilation terminated.", nvcc's remark on
// suppressing warnings.
bool is_summary_line(std::string_view line) {
  if (line == "compilation terminated." || starts_with(line, "Remark: The warnings can be")) {
    return true;
  }
  std::size_t digits = 0;
  while (digits < line.size() && is_digit(line[digits])) ++digits;
  return digits > 0 && (starts_with(line.substr(digits), " error detected in the compilation of ") ||
                        starts_with(line.substr(digits), " errors detected in the compilation of "));
}

enum class Place { kWorkspace, kPublic, kHidden };

// gcc's temporary assembly file: /tmp/ccXXXXXX.s (six letters or digits).
bool is_compiler_temp_assembly(std::string_view path) {
  if (!starts_with(path, "/tmp/cc") || path.size() != 15 || path.substr(13) != ".s") return false;
  const std::string_view name = path.substr(7, 6);
  return std::all_of(name.begin(), name.end(), [](char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  });
}

class Filter {
 public:
  Filter(const DiagnosticScope& scope, std::size_t max_bytes) : scope_(scope), max_(max_bytes) {
    for (const std::string& root : scope.public_roots) {
      roots_.push_back(fs::path(root).lexically_normal());
      std::error_code error;
      const fs::path real = fs::canonical(root, error);
      if (!error) roots_.push_back(real);
    }
    workspace_ = fs::path(scope.workspace_dir).lexically_normal();
  }

  void line(std::string_view text) {
    text = trim_right(text);
    if (text.empty()) {
      const bool after_blank = out_.size() < 2 || out_.compare(out_.size() - 2, 2, "\n\n") == 0;
      if (state_ != Place::kHidden && !after_blank) emit("");
      return;
    }
    if (auto trail = parse_include_trail(text)) {
      if (classify(*trail) != Place::kHidden) {
        emit(text);
      } else {
        hidden(*trail, 0, "note");
      }
      return;
    }
    if (const auto located = parse_location(text)) {
      const Place place = classify(located->path);
      if (place == Place::kHidden) {
        hidden(located->path, located->line, located->kind);
        return;
      }
      state_ = place;
      style_ = located->style;
      current_file_ = place == Place::kWorkspace ? relative(located->path) : std::string();
      current_line_ = located->line;
      quote_pending_ = true;
      emit(text);
      return;
    }
    if (is_compiler_tool_line(text) || is_summary_line(text) ||
        text.ends_with(": Assembler messages:")) {
      emit(text);
      return;
    }
    if (const auto context = parse_context(text)) {
      const Place place = context->path ? classify(*context->path) : state_;
      if (place != Place::kHidden && state_ != Place::kHidden) emit(text);
      return;
    }
    if (state_ == Place::kWorkspace && is_caret_line(text, style_)) {
      emit(text);
      return;
    }
    if (state_ == Place::kWorkspace && workspace_quote(text)) {
      emit(text);
      return;
    }
    // Anything else (a quote of a public or hidden file, a quote that is not the file's line, a
    // line of unknown shape) is dropped, and so is what follows it up to the next location.
    state_ = Place::kHidden;
  }

  std::string finish() && { return std::move(out_); }

 private:
  // Whether `text` quotes the current workspace location's file: gcc's "N | text" for any line N
  // of that file, nvcc's two-space indent once, for the located line.
  bool workspace_quote(std::string_view text) {
    const auto file = scope_.files.find(current_file_);
    if (file == scope_.files.end()) return false;
    if (style_ == Style::kGcc) {
      const auto quote = parse_gcc_quote(text);
      return quote && same_text(quote->second, file_line(file->second, quote->first));
    }
    if (!quote_pending_ || !starts_with(text, "  ")) return false;
    quote_pending_ = false;
    return same_text(text.substr(2), file_line(file->second, current_line_));
  }

  Place classify(const std::string& printed) const {
    // The assembler's messages about the compiler's own temporary assembly (the candidate's inline
    // asm): located and kept, never quoted (GAS does not quote; .include'd files are named as
    // themselves).
    if (printed == "{standard input}" || is_compiler_temp_assembly(printed)) return Place::kPublic;
    fs::path path(printed);
    if (path.is_relative()) path = workspace_ / path;
    path = path.lexically_normal();
    if (under(path, workspace_)) {
      return scope_.files.count(path.lexically_relative(workspace_).string()) != 0
                 ? Place::kWorkspace
                 : Place::kHidden;
    }
    for (const fs::path& root : roots_) {
      if (under(path, root)) return Place::kPublic;
    }
    return Place::kHidden;
  }

  std::string relative(const std::string& printed) const {
    fs::path path(printed);
    if (path.is_relative()) path = workspace_ / path;
    return path.lexically_normal().lexically_relative(workspace_).string();
  }

  static bool under(const fs::path& path, const fs::path& root) {
    auto p = path.begin();
    for (auto r = root.begin(); r != root.end(); ++r, ++p) {
      if (r->empty()) continue;  // a trailing '/' in the root
      if (p == path.end() || *p != *r) return false;
    }
    return p != path.end();
  }

  void hidden(const std::string& path, long line, const std::string& kind) {
    if (state_ != Place::kHidden || path != hidden_path_) {
      std::string text = path;
      if (line > 0) text += ":" + std::to_string(line);
      text += ": " + (kind.empty() ? std::string("note") : kind) +
              ": (in a file outside the workspace; not shown)";
      emit(text);
    }
    state_ = Place::kHidden;
    hidden_path_ = path;
    current_file_.clear();
  }

  void emit(std::string_view text) {
    if (full_) return;
    if (out_.size() + text.size() + 1 > max_) {
      out_ += "...\n";
      full_ = true;
      return;
    }
    out_.append(text).push_back('\n');
  }

  const DiagnosticScope& scope_;
  std::size_t max_;
  std::vector<fs::path> roots_;
  fs::path workspace_;
  std::string out_;
  bool full_ = false;
  Place state_ = Place::kHidden;
  Style style_ = Style::kGcc;
  std::string current_file_;
  long current_line_ = 0;
  bool quote_pending_ = false;
  std::string hidden_path_;
};

std::string strip_all(std::string line, const std::string& prefix) {
  if (prefix.empty()) return line;
  for (std::size_t at; (at = line.find(prefix)) != std::string::npos;) line.erase(at, prefix.size());
  return line;
}

}  // namespace

bool is_compiler_tool_line(std::string_view line) {
  static constexpr std::array<std::string_view, 18> kTools = {
      "cc1plus",  "cc1",         "g++",  "gcc",  "c++",   "cc",        "as",       "ld",
      "collect2", "/usr/bin/ld", "nvcc", "cicc", "ptxas", "fatbinary", "cudafe++", "nvlink",
      "terminate called", "virtual memory exhausted"};
  for (std::string_view tool : kTools) {
    if (line.substr(0, tool.size()) != tool) continue;
    if (line.size() == tool.size()) return true;
    const char next = line[tool.size()];
    if (next == ':' || next == ' ') return true;
  }
  return false;
}

std::string filter_compiler_output(std::string_view log, const DiagnosticScope& scope,
                                   std::size_t max_bytes) {
  Filter filter(scope, max_bytes);
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    filter.line(log.substr(start, end - start));
    start = end + 1;
  }
  return std::move(filter).finish();
}

std::string trim_diagnostics(const std::string& log, const std::string& strip_prefix,
                             std::size_t max_errors) {
  std::string out;
  std::size_t count = 0, start = 0;
  while (start < log.size() && count < max_errors) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(start, end - start);
    start = end + 1;
    if (line.find("rror") == std::string::npos) continue;
    // gcc: "path:12:5: error: message"; nvcc: "path(12): error: message"; the assembler:
    // "path:12: Error: message".
    const bool gcc_style = line.find(": error:") != std::string::npos ||
                           line.find(": fatal error:") != std::string::npos ||
                           line.find(": Error: ") != std::string::npos;
    const bool nvcc_style = line.find("): error") != std::string::npos;
    if (!gcc_style && !nvcc_style) continue;
    line = strip_all(std::move(line), strip_prefix);
    if (line.size() > 400) line = line.substr(0, 400) + "...";
    out += line + "\n";
    ++count;
  }
  return out;
}

std::string warning_lines(const std::string& log, const std::string& strip_prefix,
                          std::size_t max_lines) {
  std::string out;
  std::size_t count = 0, start = 0;
  while (start < log.size() && count < max_lines) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(start, end - start);
    start = end + 1;
    if (line.find(": warning:") == std::string::npos && line.find("warning #") == std::string::npos) {
      continue;
    }
    line = strip_all(std::move(line), strip_prefix);
    if (line.size() > 400) line = line.substr(0, 400) + "...";
    out += line + "\n";
    ++count;
  }
  return out;
}

}  // namespace cudaagent
