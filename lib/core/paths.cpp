// Runtime asset and cache locations. The source tree's share/ is compiled in as the last resort so
// tests and the quick start work straight from a build directory.
#include "cudaagent/paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#ifndef CUDAAGENT_SOURCE_SHARE_DIR
#define CUDAAGENT_SOURCE_SHARE_DIR ""
#endif

namespace cudaagent {
namespace fs = std::filesystem;

std::string share_dir() {
  if (const char* env = std::getenv("CUDAAGENT_SHARE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "cudaagent";
    if (fs::is_directory(installed / "harness", error)) return installed.string();
  }
  return CUDAAGENT_SOURCE_SHARE_DIR;
}

bool make_directories(const std::string& path, unsigned mode) {
  std::error_code error;
  if (fs::is_directory(path, error)) return true;
  fs::create_directories(path, error);
  if (error) return false;
  ::chmod(path.c_str(), mode);
  return true;
}

std::string cache_dir() {
  std::string path;
  if (const char* env = std::getenv("CUDAAGENT_CACHE_DIR"); env != nullptr && *env != '\0') {
    path = env;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    path = std::string(xdg) + "/cudaagent";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    path = std::string(home) + "/.cache/cudaagent";
  } else {
    return {};
  }
  return make_directories(path) ? path : std::string();
}

bool write_file_atomically(const std::string& path, const std::string& bytes) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
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

}  // namespace cudaagent
