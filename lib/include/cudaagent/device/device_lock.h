// Exclusive use of one timing device (cudaagent(7), TIMING: one timing job per GPU at a time): an flock on
// a file per device in the cache directory, so every cudaagent process on the machine — several
// profile runs, an agent's loop, a batch job — takes turns, and a killed holder releases it with
// its last descriptor. Key choice: advisory kernel locks, no daemon and no lock-file cleanup.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "cudaagent/base/file_lock.h"
#include "cudaagent/base/status.h"

namespace cudaagent {

class DeviceLock {
 public:
  // Takes the lock on `name` ("gpu-0", "cpu") in `dir` (created 0700 if missing), waiting at most
  // timeout_seconds. `waiting` is called once when the lock is busy, before the wait starts (a
  // message for people). A Status when the file cannot be opened or the time ran out ("the lock
  // 'dir/gpu-0.lock' is held by another timing job; gave up after 10 s"). With `stop`
  // (Session::stop_signal), a wait ends within 50 ms of a stop request with a Status ("stopped
  // by signal 15 (SIGTERM) while waiting for ...").
  static Result<DeviceLock> acquire(const std::string& dir, const std::string& name,
                                    double timeout_seconds,
                                    const std::function<void(const std::string&)>& waiting = {},
                                    const std::atomic<int>* stop = nullptr);

  const std::string& path() const { return lock_.path(); }
  double waited_seconds() const { return lock_.waited_seconds(); }

 private:
  explicit DeviceLock(FileLock lock) : lock_(std::move(lock)) {}
  FileLock lock_;  // released with it
};

// The lock name of a device: "cpu" for the CPU; for a GPU its UUID ("gpu-GPU-1a2b..."), so that
// every process that times on the same physical GPU takes the same lock whatever index it knows
// it by (inside a Slurm job every GPU is device 0). `gpu_index` is a CUDA device index or UUID as
// CUDA_VISIBLE_DEVICES or --gpus give it; `uuid_of` resolves an index (query_gpu_uuid in the
// tools, a fake in tests). When it cannot, the name falls back to the index ("gpu-index-3") and
// `note` says so: processes that disagree on indices may then overlap.
std::string device_lock_name(const std::string& device, const std::string& gpu_index,
                             const std::function<Result<std::string>(const std::string&)>& uuid_of,
                             std::string* note = nullptr);

// The lock of the device this process uses (its GPU: CUDA_VISIBLE_DEVICES's first entry, or the
// CPU), in cache_dir/locks: `name` holds the lock's name once found (the GPU's UUID is asked of
// nvidia-smi once per process, not per job); `log` gets the fallback note and the waiting message.
Result<DeviceLock> lock_this_device(const std::string& cache_dir, const std::string& device, std::string& name,
                                    double timeout_seconds, const std::function<void(const std::string&)>& log = {},
                                    const std::atomic<int>* stop = nullptr);

}  // namespace cudaagent
