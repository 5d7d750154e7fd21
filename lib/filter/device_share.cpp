// DeviceShare: the busy count of each device, and the alone reservations, under one lock.
#include "cudaagent/filter/device_share.h"

#include <chrono>
#include <optional>
#include <string>

#include "cudaagent/sandbox/process.h"

namespace cudaagent {

DeviceShare::DeviceShare(std::size_t devices) : devices_(devices == 0 ? 1 : devices) {}

Result<DeviceShare::Seat> DeviceShare::take(bool alone, const std::atomic<int>* stop) {
  std::unique_lock lock(mutex_);
  const auto stopping = [&] { return stop != nullptr && stop->load() != 0; };
  const auto least_busy = [&](bool skip_reserved) -> std::optional<std::size_t> {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      const Device& d = devices_[i];
      if (skip_reserved && (d.alone_waiting > 0 || d.alone_running)) continue;
      if (!best || d.busy < devices_[*best].busy) best = i;
    }
    return best;
  };
  std::size_t device = 0;
  if (alone) {
    device = *least_busy(false);
    Device& d = devices_[device];
    ++d.alone_waiting;
    for (;;) {
      if (stopping()) {
        --d.alone_waiting;
        changed_.notify_all();
        return stopped_status(stop->load());
      }
      if (d.busy == 0 && !d.alone_running) break;
      changed_.wait_for(lock, std::chrono::milliseconds(200));
    }
    --d.alone_waiting;
    d.alone_running = true;
  } else {
    // A stop request is looked at first: no task starts once one came.
    for (;;) {
      if (stopping()) return stopped_status(stop->load());
      if (auto free = least_busy(true)) {
        device = *free;
        break;
      }
      changed_.wait_for(lock, std::chrono::milliseconds(200));
    }
  }
  Taken taken{device, alone, false};
  for (auto& [id, other] : seats_) {  // every task now on the device shares it with this one
    if (other.device == device) other.shared = taken.shared = true;
  }
  ++devices_[device].busy;
  const Seat seat{device, next_id_++};
  seats_.emplace(seat.id, taken);
  return seat;
}

void DeviceShare::leave(const Seat& seat) {
  std::lock_guard lock(mutex_);
  const auto found = seats_.find(seat.id);
  if (found == seats_.end()) return;
  Device& d = devices_[found->second.device];
  --d.busy;
  if (found->second.alone) d.alone_running = false;
  seats_.erase(found);
  changed_.notify_all();
}

bool DeviceShare::shared(const Seat& seat) const {
  std::lock_guard lock(mutex_);
  const auto found = seats_.find(seat.id);
  return found != seats_.end() && found->second.shared;
}

bool DeviceShare::reserved(std::size_t device) const {
  std::lock_guard lock(mutex_);
  if (device >= devices_.size()) return false;
  const Device& d = devices_[device];
  return d.alone_waiting > 0 || d.alone_running;
}

}  // namespace cudaagent
