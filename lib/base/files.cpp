// Files the stages write and read: atomic replacement, whole reads, reads of files an untrusted
// process wrote (never through a link, never blocking on a FIFO), private directories.
#include "cudaagent/base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cudaagent/base/session.h"

namespace cudaagent {
namespace fs = std::filesystem;

bool make_directories(const std::string& path, unsigned mode) {
  std::error_code error;
  if (fs::is_directory(path, error)) return true;
  fs::create_directories(path, error);
  if (error) return false;
  ::chmod(path.c_str(), mode);
  return true;
}

std::string temporary_sibling(const std::string& path) {
  static std::atomic<std::uint64_t> serial{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++);
}

bool write_file_atomically(const std::string& path, const std::string& bytes) {
  const std::string temp = temporary_sibling(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const bool ok = done == bytes.size() && ::close(fd) == 0;
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    return false;
  }
  return true;
}

bool read_whole_file(const std::string& path, std::string& bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  bytes = text.str();
  return true;
}

Status read_untrusted_file(const std::string& path, std::size_t max_bytes, std::string& bytes) {
  bytes.clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int error = errno;
    return Status::error("'" + path + "': " +
                         (error == ELOOP ? std::string("is a symbolic link") : std::strerror(error)));
  }
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    problem = std::to_string(st.st_size) + " bytes, more than the limit of " +
              std::to_string(max_bytes);
  }
  // Stop once past the limit, so a file that grew after fstat is still caught.
  char buffer[65536];
  while (problem.empty()) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) problem = std::strerror(errno);
    if (n <= 0) break;
    bytes.append(buffer, static_cast<std::size_t>(n));
    if (bytes.size() > max_bytes) problem = "more than the limit of " + std::to_string(max_bytes) + " bytes";
  }
  ::close(fd);
  if (problem.empty()) return Status::ok();
  bytes.clear();
  return Status::error("'" + path + "': " + problem);
}

RemovedTree::~RemovedTree() {
  std::error_code ignored;
  if (!path_.empty() && !keep_) std::filesystem::remove_all(path_, ignored);
}

Status open_tree_for_reading(const std::string& dir) {
  std::error_code error;
  if (::chmod(dir.c_str(), 0755) != 0) return Status::error("cannot chmod " + dir + ": " + std::strerror(errno));
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    const fs::file_status status = it->symlink_status(error);
    if (error) break;
    if (fs::is_symlink(status)) continue;
    const mode_t mode = fs::is_directory(status) ? 0755 : 0644;
    if (::chmod(it->path().c_str(), mode) != 0) {
      return Status::error("cannot chmod " + it->path().string() + ": " + std::strerror(errno));
    }
  }
  if (error) return Status::error("cannot walk " + dir + ": " + error.message());
  return Status::ok();
}

Result<std::string> make_private_dir(const std::string& parent, const std::string& prefix) {
  std::string pattern = parent + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return Status::error("cannot create a directory in " + cudaagent::quoted(parent) + ": " + std::strerror(errno));
  }
  return pattern;
}

}  // namespace cudaagent
