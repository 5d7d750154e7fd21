// DeviceLock: flock(LOCK_EX | LOCK_NB) polled every 50 ms until the deadline, so a wait can end
// with a message instead of blocking forever, and a stop signal is never stuck in the kernel.
#include "cudaagent/device/device_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "cudaagent/base/files.h"
#include "cudaagent/base/session.h"

namespace cudaagent {

Result<DeviceLock> DeviceLock::acquire(const std::string& dir, const std::string& name,
                                       double timeout_seconds,
                                       const std::function<void(const std::string&)>& waiting,
                                       const std::atomic<int>* stop) {
  if (!make_directories(dir)) return Status::error("cannot create " + quoted(dir));
  const std::string path = dir + "/" + name + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::error("cannot open " + quoted(path) + ": " + std::strerror(errno));
  const auto started = std::chrono::steady_clock::now();
  bool told = false;
  while (true) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      return DeviceLock(fd, path, waited);
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
      return Status::error("the lock " + quoted(path) + " is held by another timing job; gave up after " +
                           text + " s");
    }
    if (const int signal_number = stop != nullptr ? stop->load() : 0; signal_number != 0) {
      ::close(fd);
      return Status::error("stopped by signal " + std::to_string(signal_number) +
                           " while waiting for " + quoted(path));
    }
    if (!told && waiting) waiting("waiting for " + quoted(path) + " (another timing job holds the device)");
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

DeviceLock::DeviceLock(DeviceLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), waited_(other.waited_) {}

DeviceLock& DeviceLock::operator=(DeviceLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    waited_ = other.waited_;
  }
  return *this;
}

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

std::string device_lock_name(const std::string& device, const std::string& gpu_index,
                             const std::function<Result<std::string>(const std::string&)>& uuid_of,
                             std::string* note) {
  if (device != "cuda") return "cpu";
  auto safe = [](const std::string& text) {
    std::string out;
    for (char c : text) out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_');
    return out.substr(0, 80);
  };
  auto uuid = uuid_of ? uuid_of(gpu_index) : Result<std::string>(Status::error("no UUID lookup"));
  if (uuid) return "gpu-" + safe(uuid.value());
  if (note != nullptr) {
    *note = "the GPU lock falls back to the device index " + gpu_index + ": " + uuid.status().message();
  }
  return "gpu-index-" + safe(gpu_index.empty() ? "0" : gpu_index);
}

}  // namespace cudaagent
