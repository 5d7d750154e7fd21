// LauncherResolver: which shared object launched a piece of GPU work. Called inside the CUPTI API
// callback on the launching thread, it walks that thread's stack and returns the first frame's
// object that is not the CUDA machinery itself (libcuda, libcudart, libcupti) nor the injection
// library. Key choice: two caches, return address -> verdict and object -> id, so the steady
// state is one unwind and a hash lookup per frame, with dladdr only for addresses never seen.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace cudaagent::cupti {

// Whether an object with this file name (no directory) is CUDA machinery that is never the
// launcher: libcuda.so*, libcudart*.so* (also renamed wheel copies such as libcudart-abc.so.13)
// and libcupti*.so*.
bool is_cuda_machinery(std::string_view basename);

class LauncherResolver {
 public:
  // `self` is any address inside the object that must be skipped as well (the injection library,
  // or a test program that plays its part).
  explicit LauncherResolver(const void* self);

  // Id (>= 1) of the launching object of the current call, 0 when no frame outside the skipped
  // objects was found within max_frames (unwinding stopped early: no unwind tables, JIT code).
  // Thread-safe.
  std::uint32_t resolve();

  // The object's path (resolved through symlinks; the executable as /proc/self/exe names it).
  // "" for 0 or an id never handed out. Thread-safe; the reference stays valid for the resolver's
  // life.
  const std::string& path(std::uint32_t id) const;

  struct Stats {
    std::uint64_t walks = 0;
    std::uint64_t unresolved = 0;  // walks that returned 0
    std::uint64_t objects = 0;     // distinct launcher objects seen
  };
  Stats stats() const;

  static constexpr int kMaxFrames = 64;
  static constexpr std::size_t kMaxCachedAddresses = 1 << 16;
  static constexpr std::uint32_t kSkipped = 0xFFFFFFFFu;

 private:
  // The verdict for one return address: kSkipped, 0 (in no object), or a launcher id.
  std::uint32_t classify(std::uintptr_t address);
  struct Walk;
  static int step(void* unwind_context, void* walk);

  const void* self_base_ = nullptr;
  mutable std::mutex mutex_;
  std::unordered_map<std::uintptr_t, std::uint32_t> address_cache_;
  std::unordered_map<const void*, std::uint32_t> object_ids_;  // link_map -> verdict
  std::deque<std::string> paths_;  // id - 1 -> path; a deque keeps references valid as it grows
  Stats stats_;
};

}  // namespace cudaagent::cupti
