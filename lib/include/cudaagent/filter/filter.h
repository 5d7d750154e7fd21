// The task filter (cudaagent-filter(1)): runs one synthesized task in the OS sandbox and decides whether
// it is fit for training. One harness job per task, in a fresh forked child of a warm harness
// worker (HarnessWorker: torch imported once per worker, not once per task): its checks (build,
// eager forward on two input draws, torch.compile, each output judged on its device by
// share/harness/output_judge.py) run beside other tasks' jobs; this code validates the job's
// report and decides with lib/filter/checks.cpp; a task still kept is then
// timed by the same job, eager and compiled, holding its device's timing slot alone. A task that
// ran out of GPU memory or disk beside other tasks runs once more with the device to itself
// (DeviceShare).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/candidate/tensor_compare.h"
#include "cudaagent/filter/checks.h"
#include "cudaagent/filter/memory_estimate.h"
#include "cudaagent/sandbox/process.h"
#include "cudaagent/sandbox/runner.h"
#include "cudaagent/sandbox/torch_env.h"

namespace cudaagent {

struct FilterSettings {
  std::string device = "cuda";   // "cuda" or "cpu"
  double window_low_ms = 1.0;    // the eager time window the median must fall in
  double window_high_ms = 100.0;
  // Tolerance for "two runs agree" (determinism) and "two input draws differ" (input
  // dependence): the verifier's, so a kept task is one verification can judge.
  CompareOptions tolerance;
  bool compile = true;           // run torch.compile where torch has it
  std::int64_t seed = 0;         // model init and the two input draws use seed, +1, +2
  // Timed calls of eager and of the compiled model (fewer when they take over 2 s in all): the
  // median of 10 places a task in a 1-100 ms window as well as 20 did, and the device's one
  // timing slot is held for half as long.
  int timing_runs = 10;
  double timeout_seconds = 600;  // wall-clock limit of each harness job (a worker's start is not
                                 // charged to it)
  // RLIMIT_AS of each harness job on the CPU device (never with CUDA: the driver reserves
  // address space of about twice the GPU memory). 0: none.
  std::uint64_t memory_limit_bytes = std::uint64_t{16} << 30;
  // The share of a GPU's memory that the tasks running on it may take together, by their
  // estimates (task_memory_estimate): a task that would go past it waits. 0: tasks are admitted by
  // --jobs alone. Only with CUDA, where discovery says how much memory the GPU has.
  double device_memory_fraction = 0.8;
  std::string python;            // interpreter; empty: the first python3 that imports torch
  std::string cache_dir;         // torch discovery and the timing-slot locks
  std::string scratch_dir = "/tmp";  // the workers' directories are created (0700) and removed here
  bool keep_job_dirs = false;
  // CUDA devices to spread tasks over (CUDA_VISIBLE_DEVICES values); empty: "0".
  std::vector<std::string> gpus;
  // Run the harness workers as this user (and make their output directories theirs).
  std::optional<ProcessCredentials> run_as;
  SandboxWrapper sandbox;  // empty: processes run unsandboxed
  std::string sandbox_summary = "none";
  // A stop request (Session::stop_signal; null: none): the harness workers, their jobs and the
  // wait for a device's timing slot end within a fraction of a second of it, and the task's
  // outcome is then infra with `stopped` set (never a result).
  const std::atomic<int>* stop = nullptr;
};

// Bump when a rule, the harness protocol or the record changes, so stored results of older rules
// are not reused.
// 4: scaled tolerance; 5: one job, compile timed; 6: memory and disk failures beside other tasks
// retried with the device alone, "disk" reason, cached memory released during torch.compile;
// 7: the slot given back at "timed", tasks admitted by estimated memory, filter.memory and the
// job's seconds by phase in the record; 8: the outputs judged in the job, on their device (no
// output files), compile skipped for a task eager already rejects, seat_wait in the record;
// 9: the task's memory beyond its resident bytes lent out while torch.compile works (the job's
// "compiling" and "compiled"), grow_wait and resident_bytes in the record; 10: 10 timed calls
// (was 20) after a warm-up of at least 3 calls and 0.05 s (was 0.2 s)
inline constexpr std::string_view kFilterRulesVersion = "filter-10";

struct FilterOutcome {
  // True when the machinery failed (the sandbox could not start, torch could not be imported):
  // `infra_reason` says why and the task should be retried, not rejected.
  bool infra = false;
  std::string infra_reason;
  bool stopped = false;  // infra because a stop request cut the task short
  bool kept = false;
  std::string json;  // the value of the record's "filter" key
};

class TaskFilter {
 public:
  // Finds torch for settings.python (discovery cached in settings.cache_dir). A Status when no
  // usable Python with torch exists, or --device cuda and torch sees no GPU.
  static Result<TaskFilter> create(FilterSettings settings);

  TaskFilter(TaskFilter&&) noexcept;
  TaskFilter& operator=(TaskFilter&&) noexcept;
  ~TaskFilter();

  // Filters one task (model.py source). Thread-safe: tasks may run on many threads at once;
  // each takes the least busy device and an idle worker for it (a new worker when none is idle,
  // so there are as many workers as tasks ever ran at once; they live as long as this object),
  // and that device's timing slot (an exclusive flock on <cache_dir>/locks/<device>.lock, so
  // other filter runs on the machine wait too) for its timing job.
  // `memory`: the task's estimated device memory (task_memory_estimate; 0 when unknown), of
  // which only `resident` is held while its job's torch.compile works on the CPU.
  FilterOutcome run(const std::string& model_py, TaskMemory memory = {}) const;

  // The content key of a task's result: a SHA-256 over the rules version, the source, every
  // setting that can change the result, the torch and Python versions, the device and the GPU's
  // name. Thread-safe.
  std::string job_key(const std::string& model_py) const;

  const TorchEnv& torch() const;
  const FilterSettings& settings() const;

 private:
  struct State;
  explicit TaskFilter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace cudaagent
