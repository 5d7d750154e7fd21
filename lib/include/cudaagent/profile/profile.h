// The profiler: one verified candidate in, one "profile" value out (cudaagent(7),
// TIMING). The trusted side (this code) builds the candidate as verify does,
// loads the pristine task in a clean baseline process and the candidate in a sandboxed one, both
// kept alive as interactive timing sessions, and runs alternating rounds on an exclusive device.
// It times every round on its own monotonic clock, accepts the candidate's per-call times only when
// that clock agrees, checks the outputs of hidden timed calls against the baseline's, and caches
// baseline samples by task x device x torch x settings.
//
// Kernel trace (--kernel-trace, CUDA only): ProfileSettings::kernel_trace_library is the CUPTI
// injection library (lib/cuda/cupti_inject/). The candidate's worker gets
// CUDA_INJECTION64_PATH=<it> and the library readable in its sandbox; each timing session gets
// --kernel-trace-out <candidate out>/<job>/kernels.trace (timing.py exports it as
// CUDAAGENT_CUPTI_OUT before CUDA starts) and is asked to flush after its last round. This side
// records every candidate command's window on CLOCK_MONOTONIC, reads the trace as hostile input
// and runs the kernel gates of profile_kernels.h; the profile's "kernels" key is the table of the
// top timed kernels and "kernel_trace" the rest.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "cudaagent/base/session.h"
#include "cudaagent/base/status.h"
#include "cudaagent/candidate/extension_build.h"
#include "cudaagent/candidate/tensor_compare.h"
#include "cudaagent/profile/gates.h"
#include "cudaagent/profile/kernels.h"
#include "cudaagent/profile/report.h"
#include "cudaagent/profile/timing_stats.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/records/verdict.h"
#include "cudaagent/sandbox/setup.h"
#include "cudaagent/sandbox/torch_env.h"

namespace cudaagent {

struct ProfileSettings {
  std::string device = "cuda";          // "cuda", or "cpu" (time.perf_counter, no L2 flush)
  std::string python;                   // empty: the first python3 that imports torch
  std::string cache_dir;                // build objects, torch discovery, device locks
  std::string scratch_dir = "/tmp";
  bool keep_job_dirs = false;
  BuildOptions build;
  // torch.compile mode of the compile baseline: default, reduce-overhead, max-autotune,
  // max-autotune-no-cudagraphs; "none" skips it. Torch without torch.compile: skipped, said so.
  std::string compile_mode = "default";
  int rounds = 10;                      // alternating rounds per arm
  double round_ms = 20;                 // timed work per round and arm (sets calls per round)
  int min_calls = 3;
  int max_calls = 200;
  double pool_bytes = double(std::uint64_t{2} << 30);  // fresh inputs alive in one round, at most
  double warmup_ms = 200;               // per arm, before any timed round
  int warmup_calls = 3;
  int hidden_checks = 1;                // random timed calls checked per candidate round, plus the last
  CompareOptions compare;               // tolerances of the hidden checks (verify's defaults)
  GateSettings flags;                   // speedup ceiling, timer and clock tolerances
  OverheadSettings overhead;            // host-clock gate on the candidate's timer
  double bandwidth_gbs = 4800;          // roofline floor (H200 HBM3e); 0 disables; CPU: not used
  bool fresh_baselines = false;         // measure baselines even when the store has them
  double init_timeout_seconds = 900;    // a session's load and warm-up (torch.compile included)
  double round_timeout_seconds = 120;   // one round or check
  double lock_timeout_seconds = 3600;   // waiting for the device
  std::string kernel_trace_library;     // CUPTI injection library (see the file comment); empty: none
  KernelPolicy kernel_policy;           // what the kernel gates allow (torch fallback share, ...)
  SandboxHook sandbox;                  // not set: processes run unsandboxed
  std::string sandbox_summary = "none";
  BootstrapSettings bootstrap;
};

struct ProfileRequest {
  std::string id;
  std::string model_py;                      // the pristine task
  std::string workspace_dir;                 // or:
  std::map<std::string, std::string> files;  // relative name -> bytes
};

struct ProfileOutcome {
  Verdict verdict = Verdict::kInfraError;  // PASS, or what the timing found (overrides verify's)
  std::string reason;
  std::string json;                        // the value of the record's "profile" key
};

struct ProfileWorkers;

class Profiler {
 public:
  // Finds torch (cached discovery) and prepares the private job root. A Status when no usable
  // Python with torch exists, or --device cuda without a GPU.
  static Result<Profiler> create(ProfileSettings settings);
  Profiler(Profiler&&) noexcept;
  Profiler& operator=(Profiler&&) noexcept;
  ~Profiler();

  // Profiles one candidate. Every failure of the candidate is a verdict in the outcome; machinery
  // failures are INFRA_ERROR; a Status only when the request is unusable (unreadable workspace).
  // `log` receives progress lines for people (device lock waits, baseline cache hits).
  // A candidate flagged against baselines from the store is measured again beside fresh ones
  // before the flag stands: stored baselines come from another moment of the machine, and an
  // unpaired comparison must not cost an honest candidate its reward.
  Result<ProfileOutcome> profile(const ProfileRequest& request,
                                 const std::function<void(const std::string&)>& log = {});

  // Baseline samples are cached in `store` (not owned; null: none) under stage
  // "profile-baseline", keyed by baseline_key().
  void use_store(ResultStore* store) { store_ = store; }
  std::string baseline_key(const std::string& model_py) const;

  const TorchEnv& torch() const { return torch_; }
  const ProfileSettings& settings() const { return settings_; }

 private:
  Profiler(ProfileSettings settings, TorchEnv torch, std::unique_ptr<ProfileWorkers> workers);
  // One measurement; `flagged_on_stored` is set when it withheld reward with stored baselines.
  Result<ProfileOutcome> profile_once(const ProfileRequest& request, bool use_store,
                                      const std::function<void(const std::string&)>& log,
                                      bool& flagged_on_stored);
  ProfileSettings settings_;
  TorchEnv torch_;
  std::unique_ptr<ProfileWorkers> workers_;
  std::string harness_hash_;
  ResultStore* store_ = nullptr;
  std::string lock_name_;  // the device's lock, named at the first profile (by GPU UUID)
};

}  // namespace cudaagent
