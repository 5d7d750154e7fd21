// CorrelationTable: which launcher (and thread) issued each CUPTI correlation id, written on the
// launching thread inside the API callback and read when the activity buffer completes. Key
// choice: a fixed direct-mapped table of atomics instead of a locked map, so the launch path takes
// no lock and memory stays bounded (12 MiB of address space, pages touched only as ids are used).
// A slot is reused after kSlots newer launches; a lookup then finds another id and says "unknown"
// rather than a wrong launcher.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>

namespace cudaagent::cupti {

class CorrelationTable {
 public:
  static constexpr std::size_t kSlots = std::size_t{1} << 20;

  struct Entry {
    std::uint32_t launcher = 0;  // 0: not known
    std::uint32_t tid = 0;       // the launching thread (Linux thread id)
  };

  CorrelationTable()
      : keys_(static_cast<std::uint64_t*>(std::calloc(kSlots, sizeof(std::uint64_t)))),
        tids_(static_cast<std::uint32_t*>(std::calloc(kSlots, sizeof(std::uint32_t)))) {}

  // False when the table could not be allocated; put() and get() then do nothing.
  bool usable() const { return keys_ && tids_; }

  // Thread-safe, lock-free. Correlation id 0 is never stored (CUPTI's ids start at 1).
  void put(std::uint32_t correlation, const Entry& entry) {
    if (!usable() || correlation == 0) return;
    const std::size_t slot = correlation % kSlots;
    std::atomic_ref<std::uint32_t>(tids_[slot]).store(entry.tid, std::memory_order_relaxed);
    std::atomic_ref<std::uint64_t>(keys_[slot])
        .store(std::uint64_t{correlation} << 32 | entry.launcher, std::memory_order_release);
  }

  // The entry stored for `correlation`, or nothing when none was or its slot was reused since.
  // Thread-safe, lock-free.
  std::optional<Entry> get(std::uint32_t correlation) const {
    if (!usable() || correlation == 0) return std::nullopt;
    const std::size_t slot = correlation % kSlots;
    std::atomic_ref<std::uint64_t> key(keys_[slot]);
    const std::uint64_t before = key.load(std::memory_order_acquire);
    const std::uint32_t tid = std::atomic_ref<std::uint32_t>(tids_[slot]).load(std::memory_order_relaxed);
    if (before >> 32 != correlation || key.load(std::memory_order_acquire) != before) return std::nullopt;
    return Entry{static_cast<std::uint32_t>(before & 0xFFFFFFFFu), tid};
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<std::uint64_t[], Free> keys_;  // correlation << 32 | launcher
  std::unique_ptr<std::uint32_t[], Free> tids_;
};

}  // namespace cudaagent::cupti
