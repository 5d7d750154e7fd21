// The profiler: one verified candidate in, one "profile" value out (cudaagent(7), TIMING). The
// trusted side (this code) applies verify's static policies (candidate/static_policy.h), builds the
// candidate as verify does (a cache hit after verify) and times it in the task's evaluation
// session (evaluation/evaluator.h) beside the baselines: eager and
// torch.compile of the pristine task in a clean runner, and a "null" model that does no work, whose
// time is the cost of a call itself. Rounds alternate the arms in a random order on the same fresh
// inputs, on an exclusive device. Every call of every arm is timed by the session's owner on its
// own clock and every candidate call's output is checked, so there is nothing for a candidate to
// forge and no call of it that is timed but not judged. Baseline samples are cached by
// task x device x torch x settings.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>

#include "cudaagent/base/session.h"
#include "cudaagent/base/status.h"
#include "cudaagent/candidate/extension_build.h"
#include "cudaagent/candidate/static_policy.h"
#include "cudaagent/profile/gates.h"
#include "cudaagent/profile/kernels.h"
#include "cudaagent/profile/report.h"
#include "cudaagent/profile/timing_stats.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/records/verdict.h"
#include "cudaagent/evaluation/evaluator.h"
#include "cudaagent/sandbox/setup.h"
#include "cudaagent/sandbox/torch_env.h"

namespace cudaagent {

// "auto" values of the rounds (ProfileSettings; resolve_rounds says what they become).
inline constexpr int kAutoRounds = 0;
inline constexpr int kAutoMaxRounds = -1;
inline constexpr double kAutoTargetCi = -1;
// The least rounds of the automatic adaptive rounds. The 95% interval of a median over n rounds'
// ratios cannot hold the truth more often than 1 - 2^(1-n) (it misses whenever all n lie on one
// side): 75% at three rounds, 94% at five, 97% at six.
inline constexpr int kAdaptiveLeastRounds = 6;
inline constexpr int kAdaptiveMostRounds = 10;
inline constexpr double kAdaptiveTargetCi = 0.01;

struct ProfileSettings {
  std::string device = "cuda";          // "cuda", or "cpu" (no L2 flush)
  std::string python;                   // empty: the first python3 that imports torch
  std::string cache_dir;                // build objects, torch discovery, device locks
  std::string scratch_dir = "/tmp";
  bool keep_job_dirs = false;
  BuildOptions build;
  // torch.compile mode of the compile baseline: default, reduce-overhead, max-autotune,
  // max-autotune-no-cudagraphs; "none" skips it. Torch without torch.compile: skipped, said so.
  std::string compile_mode = "default";
  // Alternating rounds per arm (the least, when adaptive). The three below default to "auto"
  // (resolve_rounds): adaptive rounds on CUDA, ten fixed rounds on the CPU.
  int rounds = kAutoRounds;
  // Adaptive rounds: after --rounds, go on round by round until the 95% interval's half-width,
  // relative to its median (the paired speedup over eager, or the candidate's time when the
  // baselines come from the store), is at most target_ci, or max_rounds have run. 0: fixed rounds.
  int max_rounds = kAutoMaxRounds;
  double target_ci = kAutoTargetCi;
  // Adaptive rounds also stop once the rounds have taken this many seconds (after --rounds): on
  // short kernels a tight target may never be met, and the agent's loop should not wait for
  // max_rounds. 0: no time limit.
  double rounds_seconds = 0;
  double round_ms = 20;                 // timed work per round and arm (sets calls per round)
  int min_calls = 3;
  int max_calls = 32;
  double warmup_ms = 200;               // per arm, before any timed round
  int warmup_calls = 3;
  double atol = 1e-2;                   // tolerances of the checks (verify's defaults)
  double rtol = 1e-2;
  GateSettings flags;                   // speedup ceiling, roofline floor
  double bandwidth_gbs = 4800;          // roofline floor (H200 HBM3e); 0 disables; CPU: not used
  bool fresh_baselines = false;         // measure baselines even when the store has them
  // model_new.py's static check, as verify's (VerifySettings::python_policy): a timed candidate
  // passes the same static rules as a checked one. Off only to test the timing layer beneath it
  // with candidates it would refuse; never for rewards.
  bool python_policy = true;
  double load_timeout_seconds = 900;    // the task's session, a runner's start, a compile warm-up
  double call_timeout_seconds = 60;     // one call
  double lock_timeout_seconds = 3600;   // waiting for the device
  SandboxHook sandbox;                  // not set: processes run unsandboxed
  std::string sandbox_summary = "none";
  std::optional<ProcessCredentials> candidate_user;  // see EvaluationSettings
  double audit_fraction = 0.25;         // see EvaluationSettings: most timed calls run unaudited
  std::string call_wait = "auto";       // see EvaluationSettings: spin on a GPU, block on the CPU
  bool call_diagnostics = false;        // see EvaluationSettings: call_cost.phases_ms in the record
  int forwards_per_call = 1;            // see EvaluationSettings
  // See EvaluationSettings; "auto" (resolve_forward_sync): "call" on CUDA with one forward per
  // call and the kernel trace on, "each" otherwise.
  std::string forward_sync = "auto";
  std::string call_timer = "auto";      // see EvaluationSettings
  double call_lead_us = kAutoCallLead;  // see EvaluationSettings; resolve_call_lead_us
  bool cpu_groups = false;              // see EvaluationSettings
  const std::atomic<int>* stop = nullptr;  // see EvaluationSettings
  // The CUPTI kernel trace of the candidate's runner (CUDA): "on" (libcudaagent_cupti.so must be
  // installed beside the programs, or named by kernel_trace_library) or "off" (the record says
  // "not traced"). Its gates (kernels.h) join the profile's: torch's or Triton's kernels in the
  // candidate's calls, GPU work outside them, a trace that cannot vouch for the calls. On by
  // default: without it an unaudited call of the candidate is not watched (the man page's step 5).
  std::string kernel_trace = "on";
  std::string kernel_trace_library;  // empty: installed_library("libcudaagent_cupti.so")
  bool kernel_provenance = false;    // see EvaluationSettings::kernel_trace_provenance
  // "on": the baselines' runner is traced too (EvaluationSettings::trace_baselines), so the
  // tracer's launch cost is on both arms; "off": on the candidate's alone. Only with the trace.
  std::string baseline_trace = "on";
  KernelPolicy kernel_policy;        // require_provenance follows kernel_provenance
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

// Replaces the rounds' "auto" values by what runs, and checks the three agree. On CUDA, rounds
// that were not given become adaptive: at least kAdaptiveLeastRounds, at most kAdaptiveMostRounds,
// stopping at a half-width of kAdaptiveTargetCi (a target not given is that one wherever
// max_rounds allows more rounds than --rounds). On the CPU, and wherever --rounds was given alone,
// fixed rounds as before (ten when not given). Profiler::create calls it; so may a front end, to
// report a bad combination before torch is found.
Status resolve_rounds(ProfileSettings& settings);

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
  // The static policies run before the build and after it, verify's own (static_policy.h); their
  // key() belongs in the key of a stored profile.
  const StaticPolicy& static_policy() const { return policy_; }

 private:
  Profiler(ProfileSettings settings, TorchEnv torch, std::unique_ptr<Evaluator> evaluator);
  // One measurement; `flagged_on_stored` is set when it withheld reward with stored baselines.
  Result<ProfileOutcome> profile_once(const ProfileRequest& request, bool use_store,
                                      const std::function<void(const std::string&)>& log,
                                      bool& flagged_on_stored);
  ProfileSettings settings_;
  TorchEnv torch_;
  std::unique_ptr<Evaluator> evaluator_;
  std::uint64_t jobs_ = 0;
  ResultStore* store_ = nullptr;
  StaticPolicy policy_;
  std::string lock_name_;  // the device's lock, named at the first profile (by GPU UUID)
};

}  // namespace cudaagent
