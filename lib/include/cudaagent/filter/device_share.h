// Which device a filter task runs on, and whether it has that device to itself. Tasks spread over
// the devices, least busy first. A task may ask for a device alone (a second run after it ran out
// of GPU memory or disk beside other tasks): it waits until the tasks there have ended, and no new
// task starts there while it waits or runs. Thread-safe; every wait ends within 0.2 s of a stop
// request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

class DeviceShare {
 public:
  explicit DeviceShare(std::size_t devices);

  // A task's place on a device, from take() to leave().
  struct Seat {
    std::size_t device = 0;
    std::size_t id = 0;
  };

  // A seat on the least busy device that no task waits to have alone (blocking while every device
  // is reserved so), or with `alone`, the least busy device once it is empty. A Status when
  // `stop` (may be null) became non-zero during the wait.
  Result<Seat> take(bool alone, const std::atomic<int>* stop);
  void leave(const Seat& seat);
  // Whether another task held a seat on the same device at any time since this one was taken.
  bool shared(const Seat& seat) const;
  // Whether a task waits for `device` alone or runs there alone: no new task is let in.
  bool reserved(std::size_t device) const;

 private:
  struct Device {
    int busy = 0;
    int alone_waiting = 0;
    bool alone_running = false;
  };
  struct Taken {
    std::size_t device = 0;
    bool alone = false;
    bool shared = false;
  };
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Device> devices_;
  std::map<std::size_t, Taken> seats_;
  std::size_t next_id_ = 0;
};

}  // namespace cudaagent
