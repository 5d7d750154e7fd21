// The file tools of an episode — Read, Write, Edit, MultiEdit, Glob, Grep — run by the trusted
// rollout process directly on the episode's workspace (no sandbox round trip, so a call costs
// microseconds to milliseconds). Key design choice: every path the model names is resolved
// beneath the workspace one component at a time from an open directory descriptor, with
// O_NOFOLLOW at every step, so no symbolic link, "..", absolute path or race can make a tool touch
// anything outside; protected files are refused by name and by inode.
//
// Every failure a model can cause is a ToolResult with error = true and a message written for the
// model ("'../x': outside the workspace"); nothing here throws or ends the episode.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent::rollout {

struct ToolResult {
  std::string text;
  bool error = false;
  static ToolResult ok(std::string text) { return {std::move(text), false}; }
  static ToolResult fail(std::string text) { return {std::move(text), true}; }
};

struct FileToolLimits {
  std::size_t max_read_bytes = 8u << 20;  // a file larger than this is not read whole
  int default_read_lines = 2000;
  std::size_t max_line_chars = 2000;      // longer lines are cut, with a note
  std::size_t max_output_bytes = 100000;  // of any one result
  std::size_t max_write_bytes = 4u << 20;
  std::size_t max_walk_entries = 20000;  // Glob/Grep stop (and say so) after this many
  std::size_t max_results = 500;         // Glob paths, Grep lines, unless head_limit
};

struct GrepArgs {
  std::string pattern;                             // PCRE2, UTF-8
  std::string path;                                // file or folder; empty: the workspace
  std::string glob;                                // only files whose relative path (or name) matches
  std::string output_mode = "files_with_matches";  // or "content", "count"
  bool case_insensitive = false;
  int context = 0;                // lines before and after each match ("content")
  std::optional<int> head_limit;  // at most this many output lines
};

struct EditSpec {
  std::string old_string, new_string;
  bool replace_all = false;
};

class WorkspaceFiles {
 public:
  // `root`: the workspace folder (absolute). `model_root`: the same folder as the model names it
  // in absolute paths (the path inside the sandbox; the same when bound at its host path).
  // `protected_paths`: relative names the tools must not change; a name ending in '/' protects a
  // folder and everything in it. A Status when `root` cannot be opened as a folder.
  static Result<WorkspaceFiles> open(const std::string& root, const std::string& model_root,
                                     std::vector<std::string> protected_paths, FileToolLimits limits = {});
  WorkspaceFiles(WorkspaceFiles&& other) noexcept;
  WorkspaceFiles& operator=(WorkspaceFiles&& other) noexcept;
  WorkspaceFiles(const WorkspaceFiles&) = delete;
  WorkspaceFiles& operator=(const WorkspaceFiles&) = delete;
  ~WorkspaceFiles();

  // Numbered lines ("     1\t..."), from line `offset` (1-based; 0 means 1), at most `limit`
  // lines (0: the default). Remembers the file's state so Write and Edit can check it was read.
  ToolResult read(const std::string& path, int offset, int limit);
  // Creates or replaces a file (parent folders are created). An existing file must have been Read
  // (or written by these tools) since it last changed.
  ToolResult write(const std::string& path, const std::string& content);
  // Replaces old_string with new_string: it must occur exactly once unless replace_all. An empty
  // old_string creates a file that does not exist yet.
  ToolResult edit(const std::string& path, const EditSpec& edit);
  // Several edits in order on one file; if any fails, the file is left unchanged.
  ToolResult multi_edit(const std::string& path, const std::vector<EditSpec>& edits);
  // Relative paths matching `pattern` ('*', '?', '[...]' within a component, '**' across them),
  // under `path` (empty: the workspace), sorted.
  ToolResult glob(const std::string& pattern, const std::string& path);
  ToolResult grep(const GrepArgs& args);

  const std::string& root() const { return root_; }
  const std::string& model_root() const { return model_root_; }

  // The relative path the model's `path` names, lexically: a Status (the model's error message)
  // when it is empty, absolute outside the workspace, or climbs out with "..". Exposed for tests
  // and the Bash tool's messages.
  Result<std::string> relative_path(std::string_view path) const;
  bool is_protected(const std::string& relative) const;

 private:
  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    std::int64_t size = 0;
    std::int64_t mtime_ns = 0;
  };
  WorkspaceFiles() = default;
  // Opens the parent folder of `relative` (creating folders when `create`), refusing links.
  Result<int> open_parent(const std::string& relative, bool create, std::string& leaf,
                          int* error = nullptr) const;
  Result<std::string> read_file(const std::string& relative, Stamp* stamp) const;
  ToolResult replace_file(const std::string& relative, const std::string& content, bool must_exist);
  ToolResult check_writable(const std::string& relative, bool& exists);

  std::string root_, model_root_;
  int root_fd_ = -1;
  std::vector<std::string> protected_;
  std::vector<std::pair<dev_t, ino_t>> protected_inodes_;
  FileToolLimits limits_;
  std::map<std::string, Stamp> read_stamps_;  // what Read (or our own write) last saw
};

}  // namespace cudaagent::rollout
