// Glob and Grep over the workspace. The walk opens each folder beneath the last with O_NOFOLLOW
// and never enters a link, so a link planted by a command cannot take a search outside; it stops
// after a bounded number of entries and says so. Grep uses PCRE2 (UTF-8, invalid bytes tolerated)
// with a match limit, so a pathological pattern costs an error message, not the episode's time.
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>

#include "cudaagent/rollout/workspace_files.h"
#include "fd_walk.h"
#include "regex.h"

namespace cudaagent::rollout {
namespace {

using detail::Fd;

struct Walk {
  std::vector<std::string> files;  // relative to the workspace, sorted
  bool truncated = false;
};

// Collects the regular files beneath the open folder `dir` (named `prefix` relative to the
// workspace), at most `max_entries` entries looked at, at most 32 folders deep.
void walk_folder(int dir, const std::string& prefix, std::size_t max_entries, int depth, Walk& walk,
                 std::size_t& seen) {
  // A new open of the folder, not a dup: a dup shares the read offset, and a second walk of the
  // same descriptor would find it at the end.
  Fd own(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!own || depth > 32) return;
  DIR* stream = ::fdopendir(own.release());
  if (stream == nullptr) return;
  std::unique_ptr<DIR, int (*)(DIR*)> closer(stream, ::closedir);
  std::vector<std::pair<std::string, bool>> entries;  // name, is folder
  while (dirent* entry = ::readdir(stream)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (++seen > max_entries) {
      walk.truncated = true;
      break;
    }
    struct stat st {};
    if (::fstatat(::dirfd(stream), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) entries.emplace_back(name, true);
    if (S_ISREG(st.st_mode)) entries.emplace_back(name, false);
  }
  std::sort(entries.begin(), entries.end());
  for (const auto& [name, folder] : entries) {
    const std::string relative = prefix.empty() || prefix == "." ? name : prefix + "/" + name;
    if (!folder) {
      walk.files.push_back(relative);
      continue;
    }
    if (walk.truncated) continue;
    Fd child(::openat(::dirfd(stream), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (child) walk_folder(child.get(), relative, max_entries, depth + 1, walk, seen);
  }
}

// Whether the path components in [p, pe) match the pattern components in [g, ge); "**" matches
// any number of components.
bool match_parts(const std::vector<std::string>& pattern, std::size_t g, const std::vector<std::string>& path,
                 std::size_t p) {
  if (g == pattern.size()) return p == path.size();
  if (pattern[g] == "**") {
    for (std::size_t skip = p; skip <= path.size(); ++skip) {
      if (match_parts(pattern, g + 1, path, skip)) return true;
    }
    return false;
  }
  if (p == path.size()) return false;
  if (::fnmatch(pattern[g].c_str(), path[p].c_str(), 0) != 0) return false;
  return match_parts(pattern, g + 1, path, p + 1);
}

// "*.{cu,cpp}" -> {"*.cu", "*.cpp"} (one level of braces).
std::vector<std::string> expand_braces(const std::string& pattern) {
  const std::size_t open = pattern.find('{');
  const std::size_t close = open == std::string::npos ? open : pattern.find('}', open);
  if (close == std::string::npos) return {pattern};
  std::vector<std::string> out;
  const std::string head = pattern.substr(0, open), tail = pattern.substr(close + 1);
  std::size_t start = open + 1;
  while (start <= close) {
    std::size_t comma = pattern.find(',', start);
    if (comma == std::string::npos || comma > close) comma = close;
    for (const std::string& rest : expand_braces(tail))
      out.push_back(head + pattern.substr(start, comma - start) + rest);
    start = comma + 1;
  }
  return out;
}

bool glob_matches(const std::vector<std::string>& patterns, const std::string& relative_to_base) {
  const std::vector<std::string> path = detail::split_path(relative_to_base);
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& pattern) {
    return match_parts(detail::split_path(pattern), 0, path, 0);
  });
}

std::string relative_to(const std::string& base, const std::string& path) {
  if (base == ".") return path;
  return path.size() > base.size() ? path.substr(base.size() + 1) : std::string();
}

// A file's lines (begin and end offsets) and the indices of those the pattern matches; a line the
// pattern is too expensive on counts as not matching and sets `too_complex`.
struct FileHits {
  std::vector<std::pair<std::size_t, std::size_t>> lines;
  std::vector<std::size_t> hits;
};

FileHits find_hits(const detail::Regex& regex, const std::string& text, bool& too_complex) {
  FileHits found;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    found.lines.emplace_back(start, end);
    start = end + 1;
  }
  for (std::size_t i = 0; i < found.lines.size(); ++i) {
    const auto [begin, end] = found.lines[i];
    const auto match = regex.search(std::string_view(text).substr(begin, end - begin));
    if (match == detail::Regex::Match::kYes) found.hits.push_back(i);
    if (match == detail::Regex::Match::kTooExpensive) too_complex = true;
  }
  return found;
}

}  // namespace

ToolResult WorkspaceFiles::glob(const std::string& pattern, const std::string& path) {
  if (pattern.empty()) return ToolResult::fail("pattern is empty");
  if (pattern.front() == '/' || pattern.find("..") != std::string::npos) {
    return ToolResult::fail("the pattern must be relative to the workspace (or to path), without '..'");
  }
  auto base = relative_path(path.empty() ? std::string(".") : path);
  if (!base) return ToolResult::fail(base.status().message());
  std::string failed_at;
  Fd dir(detail::open_folder(root_fd_, detail::split_path(base.value()), false, failed_at));
  if (!dir) return ToolResult::fail(detail::open_error(failed_at, errno));
  Walk walk;
  std::size_t seen = 0;
  walk_folder(dir.get(), base.value(), limits_.max_walk_entries, 0, walk, seen);
  const std::vector<std::string> patterns = expand_braces(pattern);
  std::string out;
  std::size_t matched = 0;
  for (const std::string& file : walk.files) {
    if (!glob_matches(patterns, relative_to(base.value(), file))) continue;
    if (++matched <= limits_.max_results) out += file + "\n";
  }
  if (matched == 0) out = "No files match '" + pattern + "'\n";
  if (matched > limits_.max_results) {
    out += "[" + std::to_string(matched - limits_.max_results) + " more matches not shown]\n";
  }
  if (walk.truncated)
    out += "[the search stopped after " + std::to_string(limits_.max_walk_entries) + " entries]\n";
  return ToolResult::ok(std::move(out));
}

ToolResult WorkspaceFiles::grep(const GrepArgs& args) {
  if (args.pattern.empty()) return ToolResult::fail("pattern is empty");
  const std::string& mode = args.output_mode;
  if (mode != "files_with_matches" && mode != "content" && mode != "count") {
    return ToolResult::fail("output_mode must be \"files_with_matches\", \"content\" or \"count\"");
  }
  auto regex = detail::Regex::compile(args.pattern, args.case_insensitive);
  if (!regex) return ToolResult::fail(regex.status().message());

  auto base = relative_path(args.path.empty() ? std::string(".") : args.path);
  if (!base) return ToolResult::fail(base.status().message());
  Walk walk;
  std::string failed_at;
  Fd dir(detail::open_folder(root_fd_, detail::split_path(base.value()), false, failed_at));
  if (dir) {
    std::size_t seen = 0;
    walk_folder(dir.get(), base.value(), limits_.max_walk_entries, 0, walk, seen);
  } else if (errno == ENOTDIR) {
    walk.files.push_back(base.value());  // a single file
  } else {
    return ToolResult::fail(detail::open_error(failed_at, errno));
  }
  const std::vector<std::string> globs =
      args.glob.empty() ? std::vector<std::string>{} : expand_braces(args.glob);
  const std::size_t max_lines = args.head_limit && *args.head_limit > 0
                                    ? static_cast<std::size_t>(*args.head_limit)
                                    : limits_.max_results;
  std::string out;
  std::size_t lines_out = 0, files_matched = 0;
  bool limited = false, too_complex = false;
  auto emit = [&](const std::string& line) {
    if (lines_out >= max_lines || out.size() + line.size() > limits_.max_output_bytes) {
      limited = true;
      return false;
    }
    out += line;
    out += '\n';
    ++lines_out;
    return true;
  };
  for (const std::string& file : walk.files) {
    if (limited) break;
    if (!globs.empty()) {
      const std::string name = file.substr(file.rfind('/') + 1);
      const bool has_slash = args.glob.find('/') != std::string::npos;
      if (!glob_matches(globs, has_slash ? relative_to(base.value(), file) : name)) continue;
    }
    auto bytes = read_file(file, nullptr);
    if (!bytes) continue;
    const std::string& text = bytes.value();
    if (text.find('\0') != std::string::npos) continue;  // binary
    const FileHits found = find_hits(regex.value(), text, too_complex);
    const auto& lines = found.lines;
    const auto& hits = found.hits;
    if (hits.empty()) continue;
    ++files_matched;
    if (mode == "files_with_matches") {
      emit(file);
    } else if (mode == "count") {
      emit(file + ":" + std::to_string(hits.size()));
    } else {
      const std::size_t context_lines = static_cast<std::size_t>(std::max(args.context, 0));
      std::size_t printed_to = 0;  // lines before this index were printed
      for (std::size_t hit : hits) {
        const std::size_t from = hit >= context_lines ? hit - context_lines : 0;
        const std::size_t to = std::min(lines.size(), hit + context_lines + 1);
        if (context_lines > 0 && printed_to > 0 && from > printed_to) emit("--");
        for (std::size_t i = std::max(from, printed_to); i < to; ++i) {
          std::string line =
              text.substr(lines[i].first,
                          std::min<std::size_t>(lines[i].second - lines[i].first, limits_.max_line_chars));
          const char sep = std::binary_search(hits.begin(), hits.end(), i) ? ':' : '-';
          if (!emit(file + sep + std::to_string(i + 1) + sep + line)) break;
        }
        printed_to = std::max(printed_to, to);
        if (limited) break;
      }
    }
  }
  if (files_matched == 0) out = "No matches for '" + args.pattern + "'\n";
  if (limited)
    out +=
        "[output limited to " + std::to_string(lines_out) + " lines; narrow the search or use head_limit]\n";
  if (walk.truncated)
    out += "[the search stopped after " + std::to_string(limits_.max_walk_entries) + " entries]\n";
  if (too_complex)
    out += "[the pattern was too expensive on some lines; those lines count as not matching]\n";
  return ToolResult::ok(std::move(out));
}

}  // namespace cudaagent::rollout
