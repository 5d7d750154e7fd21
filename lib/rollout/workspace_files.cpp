// Read, Write, Edit and MultiEdit. A file is written in place through a descriptor opened without
// following links, after the checks: the path is beneath the workspace, not protected by name or by
// inode, and an existing file was read since it last changed (so the model never overwrites what
// it has not seen, e.g. output a command produced after its last Read).
#include "cudaagent/rollout/workspace_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "fd_walk.h"

namespace cudaagent::rollout {
namespace {

using detail::Fd;

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

std::size_t count_lines(std::string_view text) {
  if (text.empty()) return 0;
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + (text.back() == '\n' ? 0 : 1);
}

std::size_t count_occurrences(std::string_view text, std::string_view part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string_view::npos;
       at = text.find(part, at + part.size())) {
    ++count;
  }
  return count;
}

// Applies one edit to `text`; an error message for the model, or empty on success.
std::string apply_edit(std::string& text, const EditSpec& edit) {
  if (edit.old_string == edit.new_string) return "old_string and new_string are the same: nothing to change";
  if (edit.old_string.empty()) return "old_string is empty (to create a file, use Write)";
  const std::size_t count = count_occurrences(text, edit.old_string);
  if (count == 0) return "old_string was not found in the file (it must match exactly, whitespace included)";
  if (count > 1 && !edit.replace_all) {
    return "old_string occurs " + std::to_string(count) +
           " times: include more surrounding text to make it unique, or set replace_all";
  }
  std::string out;
  out.reserve(text.size());
  std::size_t from = 0;
  for (std::size_t at = text.find(edit.old_string); at != std::string::npos;
       at = text.find(edit.old_string, from)) {
    out.append(text, from, at - from).append(edit.new_string);
    from = at + edit.old_string.size();
    if (!edit.replace_all) break;
  }
  out.append(text, from, std::string::npos);
  text = std::move(out);
  return {};
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

Result<WorkspaceFiles> WorkspaceFiles::open(const std::string& root, const std::string& model_root,
                                            std::vector<std::string> protected_paths, FileToolLimits limits) {
  WorkspaceFiles files;
  files.root_ = std::filesystem::path(root).lexically_normal().string();
  files.model_root_ = std::filesystem::path(model_root).lexically_normal().string();
  while (files.root_.size() > 1 && files.root_.back() == '/') files.root_.pop_back();
  while (files.model_root_.size() > 1 && files.model_root_.back() == '/') files.model_root_.pop_back();
  files.root_fd_ = ::open(files.root_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (files.root_fd_ < 0) {
    return Status::error("cannot open the workspace '" + root + "': " + std::strerror(errno));
  }
  files.protected_ = std::move(protected_paths);
  files.limits_ = limits;
  for (const std::string& name : files.protected_) {
    struct stat st {};
    std::string trimmed = name;
    while (!trimmed.empty() && trimmed.back() == '/') trimmed.pop_back();
    if (::fstatat(files.root_fd_, trimmed.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
      files.protected_inodes_.emplace_back(st.st_dev, st.st_ino);
    }
  }
  return files;
}

WorkspaceFiles::WorkspaceFiles(WorkspaceFiles&& other) noexcept
    : root_(std::move(other.root_)),
      model_root_(std::move(other.model_root_)),
      root_fd_(std::exchange(other.root_fd_, -1)),
      protected_(std::move(other.protected_)),
      protected_inodes_(std::move(other.protected_inodes_)),
      limits_(other.limits_),
      read_stamps_(std::move(other.read_stamps_)) {}

WorkspaceFiles& WorkspaceFiles::operator=(WorkspaceFiles&& other) noexcept {
  if (this != &other) {
    if (root_fd_ >= 0) ::close(root_fd_);
    root_ = std::move(other.root_);
    model_root_ = std::move(other.model_root_);
    root_fd_ = std::exchange(other.root_fd_, -1);
    protected_ = std::move(other.protected_);
    protected_inodes_ = std::move(other.protected_inodes_);
    limits_ = other.limits_;
    read_stamps_ = std::move(other.read_stamps_);
  }
  return *this;
}

WorkspaceFiles::~WorkspaceFiles() {
  if (root_fd_ >= 0) ::close(root_fd_);
}

Result<std::string> WorkspaceFiles::relative_path(std::string_view path) const {
  if (path.empty()) return Status::error("the path is empty");
  if (path.find('\0') != std::string_view::npos) return Status::error("the path contains a NUL byte");
  std::filesystem::path p{std::string(path)};
  const std::string shown = "'" + std::string(path) + "'";
  if (p.is_absolute()) {
    const std::filesystem::path normal = p.lexically_normal();
    std::filesystem::path base;
    for (const std::string& root : {model_root_, root_}) {
      const auto rel = normal.lexically_relative(root);
      if (!rel.empty() && *rel.begin() != "..") {
        base = rel;
        break;
      }
    }
    if (base.empty()) return Status::error(shown + " is outside the workspace (" + model_root_ + ")");
    p = base;
  }
  std::string relative = p.lexically_normal().string();
  while (!relative.empty() && relative.back() == '/') relative.pop_back();
  if (relative.empty() || relative == ".") return std::string(".");
  if (relative == ".." || relative.rfind("../", 0) == 0) {
    return Status::error(shown + " is outside the workspace (" + model_root_ + ")");
  }
  return relative;
}

bool WorkspaceFiles::is_protected(const std::string& relative) const {
  return std::any_of(protected_.begin(), protected_.end(), [&](const std::string& entry) {
    if (!entry.empty() && entry.back() == '/') {
      const std::string folder = entry.substr(0, entry.size() - 1);
      return relative == folder || relative.rfind(entry, 0) == 0;
    }
    return relative == entry;
  });
}

Result<int> WorkspaceFiles::open_parent(const std::string& relative, bool create, std::string& leaf,
                                        int* error) const {
  std::vector<std::string> parts = detail::split_path(relative);
  if (parts.empty()) return Status::error("the workspace itself is a folder, not a file");
  leaf = parts.back();
  parts.pop_back();
  std::string failed_at;
  const int fd = detail::open_folder(root_fd_, parts, create, failed_at);
  if (fd < 0) {
    const int saved = errno;
    if (error != nullptr) *error = saved;
    return Status::error(detail::open_error(failed_at, saved));
  }
  return fd;
}

Result<std::string> WorkspaceFiles::read_file(const std::string& relative, Stamp* stamp) const {
  std::string leaf;
  auto parent = open_parent(relative, false, leaf);
  if (!parent) return parent.status();
  Fd dir(parent.value());
  Fd fd(::openat(dir.get(), leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return Status::error(detail::open_error(relative, errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::error(detail::open_error(relative, errno));
  if (S_ISDIR(st.st_mode))
    return Status::error("'" + relative + "' is a folder, not a file (use Glob or Bash ls)");
  if (!S_ISREG(st.st_mode)) return Status::error("'" + relative + "' is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > limits_.max_read_bytes) {
    return Status::error("'" + relative + "' is " + std::to_string(st.st_size) +
                         " bytes, more than the file tools read (" + std::to_string(limits_.max_read_bytes) +
                         "); use Bash (head, sed -n, grep) for parts of it");
  }
  std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  if (stamp != nullptr) *stamp = Stamp{st.st_dev, st.st_ino, st.st_size, mtime_ns(st)};
  return bytes;
}

ToolResult WorkspaceFiles::read(const std::string& path, int offset, int limit) {
  auto relative = relative_path(path);
  if (!relative) return ToolResult::fail(relative.status().message());
  Stamp stamp;
  auto bytes = read_file(relative.value(), &stamp);
  if (!bytes) return ToolResult::fail(bytes.status().message());
  read_stamps_[relative.value()] = stamp;
  const std::string& text = bytes.value();
  if (text.find('\0') != std::string::npos) {
    return ToolResult::ok("'" + relative.value() + "' is a binary file (" + std::to_string(text.size()) +
                          " bytes); not shown");
  }
  if (text.empty()) return ToolResult::ok("(the file '" + relative.value() + "' is empty)");
  const std::size_t first = static_cast<std::size_t>(std::max(offset, 1));
  const std::size_t count = static_cast<std::size_t>(limit > 0 ? limit : limits_.default_read_lines);
  const std::size_t total = count_lines(text);
  if (first > total) {
    return ToolResult::fail("offset " + std::to_string(first) + " is past the end: '" + relative.value() +
                            "' has " + std::to_string(total) + " lines");
  }
  std::string out;
  std::size_t line_no = 1, start = 0, shown = 0, cut_lines = 0;
  bool cut_output = false;
  while (start < text.size() && shown < count) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (line_no >= first) {
      std::string_view line(text.data() + start, end - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      std::string number = std::to_string(line_no);
      if (number.size() < 6) number.insert(0, 6 - number.size(), ' ');
      if (line.size() > limits_.max_line_chars) {
        line = line.substr(0, limits_.max_line_chars);
        ++cut_lines;
      }
      if (out.size() + line.size() + 8 > limits_.max_output_bytes) {
        cut_output = true;
        break;
      }
      out.append(number).append("\t").append(line).append("\n");
      ++shown;
    }
    ++line_no;
    start = end + 1;
  }
  const std::size_t last = first + shown - 1;
  if (cut_output || last < total) {
    out += "[lines " + std::to_string(first) + "-" + std::to_string(last) + " of " + std::to_string(total) +
           "; read on with offset=" + std::to_string(last + 1) + "]\n";
  }
  if (cut_lines > 0) {
    out += "[" + std::to_string(cut_lines) + " line(s) longer than " +
           std::to_string(limits_.max_line_chars) + " characters were cut]\n";
  }
  return ToolResult::ok(std::move(out));
}

ToolResult WorkspaceFiles::check_writable(const std::string& relative, bool& exists) {
  if (relative == ".") return ToolResult::fail("the workspace itself is a folder, not a file");
  if (is_protected(relative)) {
    return ToolResult::fail("'" + relative +
                            "' is protected (read-only): model.py, binding.cpp, "
                            "binding_registry.h, SKILL.md and utils/ must not be changed");
  }
  std::string leaf;
  int error = 0;
  auto parent = open_parent(relative, false, leaf, &error);
  exists = false;
  if (!parent) {
    // A missing folder is made by the write; anything else (a link, a file in the way) is an error.
    if (error == ENOENT) return ToolResult::ok("");
    return ToolResult::fail(parent.status().message());
  }
  Fd dir(parent.value());
  struct stat st {};
  if (::fstatat(dir.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return ToolResult::ok("");
    return ToolResult::fail(detail::open_error(relative, errno));
  }
  if (S_ISLNK(st.st_mode)) return ToolResult::fail(detail::open_error(relative, ELOOP));
  if (S_ISDIR(st.st_mode)) return ToolResult::fail(detail::open_error(relative, EISDIR));
  if (!S_ISREG(st.st_mode)) return ToolResult::fail("'" + relative + "' is not a regular file");
  for (const auto& [dev, ino] : protected_inodes_) {
    if (st.st_dev == dev && st.st_ino == ino)
      return ToolResult::fail("'" + relative + "' is a protected file");
  }
  exists = true;
  const auto seen = read_stamps_.find(relative);
  if (seen == read_stamps_.end()) {
    return ToolResult::fail("'" + relative + "' exists and has not been read: Read it first, then write");
  }
  const Stamp& s = seen->second;
  if (s.dev != st.st_dev || s.ino != st.st_ino || s.size != st.st_size || s.mtime_ns != mtime_ns(st)) {
    return ToolResult::fail("'" + relative + "' changed since it was last read: Read it again first");
  }
  return ToolResult::ok("");
}

ToolResult WorkspaceFiles::replace_file(const std::string& relative, const std::string& content,
                                        bool must_exist) {
  if (content.size() > limits_.max_write_bytes) {
    return ToolResult::fail("the content is " + std::to_string(content.size()) + " bytes, more than the " +
                            std::to_string(limits_.max_write_bytes) + " a file may have");
  }
  std::string leaf;
  auto parent = open_parent(relative, !must_exist, leaf);
  if (!parent) return ToolResult::fail(parent.status().message());
  Fd dir(parent.value());
  const int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (must_exist ? 0 : O_CREAT);
  Fd fd(::openat(dir.get(), leaf.c_str(), flags, 0644));
  if (!fd) return ToolResult::fail(detail::open_error(relative, errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return ToolResult::fail("'" + relative + "' is not a regular file");
  }
  // Overwrite, then cut to the new length: truncating to zero first makes ext4 flush the file on
  // close (its replace-by-truncate heuristic), which costs milliseconds per edit.
  if (::lseek(fd.get(), 0, SEEK_SET) != 0 || !write_all(fd.get(), content) ||
      ::ftruncate(fd.get(), static_cast<off_t>(content.size())) != 0) {
    return ToolResult::fail("cannot write '" + relative + "': " + std::strerror(errno));
  }
  if (::fstat(fd.get(), &st) == 0)
    read_stamps_[relative] = Stamp{st.st_dev, st.st_ino, st.st_size, mtime_ns(st)};
  return ToolResult::ok("");
}

ToolResult WorkspaceFiles::write(const std::string& path, const std::string& content) {
  auto relative = relative_path(path);
  if (!relative) return ToolResult::fail(relative.status().message());
  bool exists = false;
  if (auto check = check_writable(relative.value(), exists); check.error) return check;
  if (auto done = replace_file(relative.value(), content, false); done.error) return done;
  return ToolResult::ok((exists ? "Replaced '" : "Created '") + relative.value() + "' (" +
                        std::to_string(content.size()) + " bytes, " + std::to_string(count_lines(content)) +
                        " lines)");
}

ToolResult WorkspaceFiles::edit(const std::string& path, const EditSpec& edit) {
  auto relative = relative_path(path);
  if (!relative) return ToolResult::fail(relative.status().message());
  bool exists = false;
  if (auto check = check_writable(relative.value(), exists); check.error) return check;
  if (!exists) {
    if (!edit.old_string.empty()) return ToolResult::fail("'" + relative.value() + "' does not exist");
    if (auto done = replace_file(relative.value(), edit.new_string, false); done.error) return done;
    return ToolResult::ok("Created '" + relative.value() + "'");
  }
  auto text = read_file(relative.value(), nullptr);
  if (!text) return ToolResult::fail(text.status().message());
  const std::size_t count = edit.replace_all ? count_occurrences(text.value(), edit.old_string) : 1;
  if (std::string why = apply_edit(text.value(), edit); !why.empty()) return ToolResult::fail(why);
  if (auto done = replace_file(relative.value(), text.value(), true); done.error) return done;
  return ToolResult::ok("Edited '" + relative.value() + "': " + std::to_string(count) + " replacement" +
                        (count == 1 ? "" : "s"));
}

ToolResult WorkspaceFiles::multi_edit(const std::string& path, const std::vector<EditSpec>& edits) {
  auto relative = relative_path(path);
  if (!relative) return ToolResult::fail(relative.status().message());
  if (edits.empty()) return ToolResult::fail("edits is empty");
  bool exists = false;
  if (auto check = check_writable(relative.value(), exists); check.error) return check;
  std::string text;
  std::size_t first = 0;
  if (!exists) {
    if (!edits[0].old_string.empty()) return ToolResult::fail("'" + relative.value() + "' does not exist");
    text = edits[0].new_string;  // the first edit creates the file
    first = 1;
  } else {
    auto bytes = read_file(relative.value(), nullptr);
    if (!bytes) return ToolResult::fail(bytes.status().message());
    text = std::move(bytes.value());
  }
  for (std::size_t i = first; i < edits.size(); ++i) {
    if (std::string why = apply_edit(text, edits[i]); !why.empty()) {
      return ToolResult::fail("edit " + std::to_string(i + 1) + " of " + std::to_string(edits.size()) + ": " +
                              why + "; no edit was applied");
    }
  }
  if (auto done = replace_file(relative.value(), text, exists); done.error) return done;
  return ToolResult::ok("Applied " + std::to_string(edits.size()) + " edits to '" + relative.value() + "'");
}

}  // namespace cudaagent::rollout
