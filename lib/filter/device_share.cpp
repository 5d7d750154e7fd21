// DeviceShare: the busy count, the memory estimates and the alone reservations of each device,
// and the queue of waiting tasks, under one lock. Tasks are seated strictly in turn: a large task
// waiting for memory is not overtaken forever by small ones that would still fit.
#include "cudaagent/filter/device_share.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "cudaagent/sandbox/process.h"

namespace cudaagent {

namespace {

constexpr auto kStopPoll = std::chrono::milliseconds(200);

// Waits on `changed` until `ready()` holds, or returns the Status of a stop request (looked at
// first: nothing starts once one came); the caller undoes its own bookkeeping then.
template <class Ready>
Status wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& changed,
                  const std::atomic<int>* stop, Ready ready) {
  for (;;) {
    if (stop != nullptr && stop->load() != 0) return stopped_status(stop->load());
    if (ready()) return Status::ok();
    changed.wait_for(lock, kStopPoll);
  }
}

}  // namespace

DeviceShare::DeviceShare(std::size_t devices, std::uint64_t memory_budget)
    : devices_(devices == 0 ? 1 : devices), memory_budget_(memory_budget) {}

Result<DeviceShare::Seat> DeviceShare::take(bool alone, std::uint64_t bytes,
                                            const std::atomic<int>* stop,
                                            std::optional<std::uint64_t> resident) {
  std::unique_lock lock(mutex_);
  const std::uint64_t growth = bytes - std::min(bytes, resident.value_or(bytes));
  return alone ? take_alone(lock, stop) : take_in_turn(lock, bytes, growth, stop);
}

Result<DeviceShare::Seat> DeviceShare::take_alone(std::unique_lock<std::mutex>& lock,
                                                  const std::atomic<int>* stop) {
  std::size_t device = 0;
  for (std::size_t i = 1; i < devices_.size(); ++i) {
    if (devices_[i].busy < devices_[device].busy) device = i;
  }
  Device& d = devices_[device];
  ++d.alone_waiting;
  const Status waited =
      wait_until(lock, changed_, stop, [&] { return d.busy == 0 && !d.alone_running; });
  --d.alone_waiting;
  if (!waited) {
    changed_.notify_all();
    return waited;
  }
  d.alone_running = true;
  return seat_on(device, 0, 0, false, true);
}

Result<DeviceShare::Seat> DeviceShare::take_in_turn(std::unique_lock<std::mutex>& lock,
                                                    std::uint64_t bytes, std::uint64_t growth,
                                                    const std::atomic<int>* stop) {
  const std::size_t ticket = next_ticket_++;
  turns_.push_back(ticket);
  const auto give_up_turn = [&] {
    turns_.erase(std::find(turns_.begin(), turns_.end(), ticket));
    changed_.notify_all();
  };
  // Beside what the tasks there hold now; no room is kept for their growths (the class comment
  // says why that cannot deadlock).
  const auto fits = [&](std::size_t i) { return devices_[i].bytes + bytes <= memory_budget_; };
  // The least busy device not reserved for a task alone, where no task waits to grow and `bytes`
  // fit; an empty device takes any task, so an estimate over the budget still runs, by itself.
  const auto free_device = [&]() -> std::optional<std::size_t> {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      const Device& d = devices_[i];
      if (d.alone_waiting > 0 || d.alone_running || d.growing > 0) continue;
      const bool admitted = memory_budget_ == 0 || d.busy == 0 || fits(i);
      if (admitted && (!best || d.busy < devices_[*best].busy)) best = i;
    }
    return best;
  };
  std::optional<std::size_t> device;
  const Status waited = wait_until(lock, changed_, stop, [&] {
    if (turns_.front() == ticket) device = free_device();
    return device.has_value();
  });
  give_up_turn();  // the next task's turn, whether this one got a seat or was stopped
  if (!waited) return waited;
  const bool may_shrink = memory_budget_ > 0 && growth > 0 && bytes <= memory_budget_;
  return seat_on(*device, bytes, growth, may_shrink, false);
}

DeviceShare::Seat DeviceShare::seat_on(std::size_t device, std::uint64_t bytes,
                                       std::uint64_t growth, bool may_shrink, bool alone) {
  Taken taken;
  taken.device = device;
  taken.bytes = bytes;
  taken.growth = growth;
  taken.may_shrink = may_shrink;
  taken.alone = alone;
  for (auto& [id, other] : seats_) {  // every task now on the device shares it with this one
    if (other.device == device) other.shared = taken.shared = true;
  }
  Device& d = devices_[device];
  ++d.busy;
  d.bytes += bytes;
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
  const Taken& taken = found->second;
  d.bytes -= taken.is_shrunk ? taken.bytes - taken.growth : taken.bytes;
  if (taken.alone) d.alone_running = false;
  seats_.erase(found);
  changed_.notify_all();
}

void DeviceShare::shrink(const Seat& seat) {
  std::lock_guard lock(mutex_);
  const auto found = seats_.find(seat.id);
  if (found == seats_.end()) return;
  Taken& taken = found->second;
  if (!taken.may_shrink || taken.is_shrunk || taken.grown) return;
  taken.is_shrunk = true;
  devices_[taken.device].bytes -= taken.growth;
  changed_.notify_all();
}

Status DeviceShare::grow(const Seat& seat, const std::atomic<int>* stop) {
  std::unique_lock lock(mutex_);
  const auto found = seats_.find(seat.id);
  if (found == seats_.end() || !found->second.is_shrunk) return Status::ok();
  Device& d = devices_[found->second.device];
  Taken& taken = found->second;  // the seat stays while its own task waits here
  ++d.growing;
  const Status waited =
      wait_until(lock, changed_, stop, [&] { return d.bytes + taken.growth <= memory_budget_; });
  --d.growing;
  if (!waited) {
    changed_.notify_all();
    return waited;
  }
  taken.is_shrunk = false;
  taken.grown = true;
  d.bytes += taken.growth;
  changed_.notify_all();
  return Status::ok();
}

bool DeviceShare::shrunk(const Seat& seat) const {
  std::lock_guard lock(mutex_);
  const auto found = seats_.find(seat.id);
  return found != seats_.end() && found->second.is_shrunk;
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

std::size_t DeviceShare::queued() const {
  std::lock_guard lock(mutex_);
  return turns_.size();
}

std::size_t DeviceShare::growing() const {
  std::lock_guard lock(mutex_);
  std::size_t count = 0;
  for (const Device& d : devices_) count += static_cast<std::size_t>(d.growing);
  return count;
}

}  // namespace cudaagent
