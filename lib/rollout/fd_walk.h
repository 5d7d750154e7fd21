// Private helpers of the file tools: an owned descriptor, and opening one path component at a time
// beneath a folder descriptor with O_NOFOLLOW, so links are never followed and ".." never climbs.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cudaagent::rollout::detail {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// "a/b/c" -> {"a", "b", "c"}; empty parts and "." dropped.
inline std::vector<std::string> split_path(std::string_view relative) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= relative.size()) {
    std::size_t end = relative.find('/', start);
    if (end == std::string_view::npos) end = relative.size();
    std::string_view part = relative.substr(start, end - start);
    if (!part.empty() && part != ".") parts.emplace_back(part);
    start = end + 1;
  }
  return parts;
}

// Why an open of `what` failed, in words for the model.
inline std::string open_error(std::string_view what, int error) {
  const std::string name = "'" + std::string(what) + "'";
  switch (error) {
    case ELOOP: return name + " is a symbolic link: the file tools do not follow links";
    case ENOENT: return name + " does not exist";
    case ENOTDIR: return name + ": a part of the path is not a folder";
    case EISDIR: return name + " is a folder, not a file";
    case EACCES:
    case EPERM: return name + ": permission denied";
    default: return name + ": " + std::string(std::strerror(error));
  }
}

// Opens the folder reached by `parts` from `dir` (a descriptor that stays the caller's), creating
// missing folders when `create`. -1 with errno set on failure; `failed_at` names the component.
inline int open_folder(int dir, const std::vector<std::string>& parts, bool create, std::string& failed_at) {
  Fd current(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));  // its own offset
  if (!current) return -1;
  std::string walked;
  for (const std::string& part : parts) {
    walked += (walked.empty() ? "" : "/") + part;
    int next = ::openat(current.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && create) {
      if (::mkdirat(current.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
        failed_at = walked;
        return -1;
      }
      next = ::openat(current.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next < 0) {
      // O_DIRECTORY|O_NOFOLLOW on a link gives ENOTDIR on some kernels: say "link" when it is one.
      struct stat st {};
      if (errno == ENOTDIR && ::fstatat(current.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode)) {
        errno = ELOOP;
      }
      failed_at = walked;
      return -1;
    }
    current = Fd(next);
  }
  return current.release();
}

}  // namespace cudaagent::rollout::detail
