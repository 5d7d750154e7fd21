// Which device a filter task runs on, and whether it has that device to itself. Tasks spread over
// the devices, least busy first, in the order they asked. With a memory budget, a task whose
// estimated device memory would take a device past it waits until enough of it is free there
// (on an empty device every task may start). A task may ask for a device alone (a second run
// after it ran out of GPU memory or disk beside other tasks): it waits until the tasks there
// have ended, and no new task starts there while it waits or runs. Thread-safe; every wait ends
// within 0.2 s of a stop request.
//
// A task may hold less than its estimate for a while (its job spends seconds on the CPU in
// torch.compile holding only its inputs and one output): shrink() gives the rest back to the
// device, and grow() takes it again, waiting until it fits; while a task waits to grow, no new
// task is let in. No room is kept for growths: a task is admitted when its estimate fits beside
// what the others hold now. This cannot deadlock (the banker's argument): the tasks can always
// end in some order. A task that holds its whole estimate needs nothing more and ends, giving all
// of it back; a shrunk task needs its growth. Admitting a task keeps such an order (it goes first,
// and its ending restores the state before it), so does shrinking (the task that shrank finds its
// growth among the bytes it gave back, at its place in the order) and so does a growth that fits
// (the grown task goes first). Only a task whose estimate fits the budget by itself may shrink: one
// let in over the budget because the device was empty could never grow back beside anyone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

class DeviceShare {
 public:
  // `memory_budget` bytes per device; 0: tasks are admitted by count alone.
  explicit DeviceShare(std::size_t devices, std::uint64_t memory_budget = 0);

  // A task's place on a device, from take() to leave().
  struct Seat {
    std::size_t device = 0;
    std::size_t id = 0;
  };

  // A seat on the least busy device that no task waits to have alone and where `bytes` (the
  // task's estimated device memory; 0 when unknown) fit the budget, blocking until there is one
  // and no earlier task still waits; or with `alone`, the least busy device once it is empty. A
  // Status when `stop` (may be null) became non-zero during the wait.
  // `resident` (at most `bytes`) is what the task keeps while shrunk; by default all of it.
  Result<Seat> take(bool alone, std::uint64_t bytes, const std::atomic<int>* stop,
                    std::optional<std::uint64_t> resident = std::nullopt);
  // Holds only the seat's resident bytes from now on (once per seat; nothing for a seat that may
  // not shrink).
  void shrink(const Seat& seat);
  // Holds the whole estimate again, waiting until it fits; at once for a seat never shrunk or
  // already grown. A Status when `stop` became non-zero during the wait.
  Status grow(const Seat& seat, const std::atomic<int>* stop);
  // Whether the seat holds less than its estimate now.
  bool shrunk(const Seat& seat) const;
  void leave(const Seat& seat);
  // Whether another task held a seat on the same device at any time since this one was taken.
  bool shared(const Seat& seat) const;
  // Whether a task waits for `device` alone or runs there alone: no new task is let in.
  bool reserved(std::size_t device) const;
  // How many tasks wait for a seat (not counting those waiting to be alone).
  std::size_t queued() const;
  // How many tasks wait to grow back, on all devices.
  std::size_t growing() const;

 private:
  struct Device {
    int busy = 0;
    std::uint64_t bytes = 0;  // what the tasks seated there hold (estimates, or resident bytes)
    int alone_waiting = 0;
    bool alone_running = false;
    int growing = 0;  // tasks waiting to grow: no new task is let in meanwhile
  };
  struct Taken {
    std::size_t device = 0;
    std::uint64_t bytes = 0;   // the estimate
    std::uint64_t growth = 0;  // estimate - resident: what shrink() gives back
    bool may_shrink = false;   // a budget, a growth, and an estimate within the budget
    bool is_shrunk = false;
    bool grown = false;        // shrunk once and grown again: its growth is settled
    bool alone = false;
    bool shared = false;
  };
  Result<Seat> take_alone(std::unique_lock<std::mutex>& lock, const std::atomic<int>* stop);
  Result<Seat> take_in_turn(std::unique_lock<std::mutex>& lock, std::uint64_t bytes,
                            std::uint64_t growth, const std::atomic<int>* stop);
  Seat seat_on(std::size_t device, std::uint64_t bytes, std::uint64_t growth, bool may_shrink,
               bool alone);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Device> devices_;
  std::uint64_t memory_budget_ = 0;
  std::map<std::size_t, Taken> seats_;
  std::deque<std::size_t> turns_;  // tickets of the tasks waiting for a seat, oldest first
  std::size_t next_ticket_ = 0;
  std::size_t next_id_ = 0;
};

}  // namespace cudaagent
