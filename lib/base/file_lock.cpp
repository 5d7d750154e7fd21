#include "cudaagent/base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include "cudaagent/base/session.h"

namespace cudaagent {

Result<FileLock> FileLock::acquire(const std::string& path, double timeout_seconds, const std::string& holder,
                                   const std::function<void()>& busy, const std::atomic<int>* stop) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::error("cannot open " + quoted(path) + ": " + std::strerror(errno));
  const auto started = std::chrono::steady_clock::now();
  bool told = false;
  while (true) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      return FileLock(fd, path, waited);
    }
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const int error = errno;
      ::close(fd);
      return Status::error("cannot lock " + quoted(path) + ": " + std::strerror(error));
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (waited >= timeout_seconds) {
      ::close(fd);
      char text[32];
      std::snprintf(text, sizeof text, "%.0f", timeout_seconds);
      return Status::error("the lock " + quoted(path) + " is held by " + holder + "; gave up after " + text + " s");
    }
    if (const int signal_number = stop != nullptr ? stop->load() : 0; signal_number != 0) {
      ::close(fd);
      return Status::error("stopped by signal " + std::to_string(signal_number) + " while waiting for " +
                           quoted(path));
    }
    if (!told && busy) busy();
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), waited_(other.waited_) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    waited_ = other.waited_;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace cudaagent
