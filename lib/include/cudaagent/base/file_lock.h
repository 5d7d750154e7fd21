// An exclusive advisory lock on one file (flock), taken with a bounded wait: polled every 50 ms,
// so a wait ends with a message instead of blocking forever and a stop signal is never stuck in
// the kernel; a killed holder releases it with its last descriptor. The device lock (one timing
// job per GPU) and the build cache's precompiled header (one builder makes it) both use it.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "cudaagent/base/status.h"

namespace cudaagent {

class FileLock {
 public:
  // Opens `path` (created 0600, a symlink refused) and locks it, waiting at most timeout_seconds.
  // `busy` is called once when another holder has it, before the wait starts. A Status when the
  // file cannot be opened or locked, when the time ran out ("the lock 'PATH' is held by HOLDER;
  // gave up after N s"), or, with `stop` (Session::stop_signal), within 50 ms of a stop request.
  static Result<FileLock> acquire(const std::string& path, double timeout_seconds,
                                  const std::string& holder = "another process",
                                  const std::function<void()>& busy = {},
                                  const std::atomic<int>* stop = nullptr);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();  // releases

  const std::string& path() const { return path_; }
  double waited_seconds() const { return waited_; }

 private:
  FileLock(int fd, std::string path, double waited) : fd_(fd), path_(std::move(path)), waited_(waited) {}
  int fd_ = -1;
  std::string path_;
  double waited_ = 0;
};

}  // namespace cudaagent
