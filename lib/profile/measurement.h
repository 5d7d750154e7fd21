// Internal to the profile area: what one profile measures and how. Measurement drives the task's
// evaluation session through warm-up and alternating rounds; ProfileEvidence turns the samples
// into the "profile" value (statistics, gates, verdict).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cudaagent/device/gpu_query.h"
#include "cudaagent/evaluation/evaluator.h"
#include "cudaagent/profile/kernel_trace.h"
#include "cudaagent/profile/kernels.h"
#include "cudaagent/profile/profile.h"
#include "cudaagent/profile/report.h"
#include "cudaagent/profile/timing_report.h"

namespace cudaagent {

struct ProfileEvidence {
  const ProfileSettings* settings = nullptr;
  const TorchEnv* torch = nullptr;
  const CpuPlacement* placement = nullptr;  // where the session's processes ran
  std::chrono::steady_clock::time_point started;
  std::string snapshot_hash;
  std::vector<std::pair<std::string, double>> timings;
  bool build_cached = false;
  std::string baseline_key;
  std::vector<Result<GpuReading>> clocks;  // before and after the rounds (CUDA only)

  BaselineSamples baselines;       // eager and compile, the cost of a call removed
  bool baselines_cached = false;
  bool baselines_sound = false;    // complete, from this run: fit for the store
  bool baselines_stored = false;
  bool rechecked = false;  // a second measurement, because stored baselines flagged the candidate
  RoundSamples candidate;          // the cost of a call removed
  std::vector<double> call_cost_ms;  // per round: the null model's median host time
  double call_cost_removed_ms = 0;   // removed from the baselines' samples: the null calls' 10th percentile
  // The same null model in the candidate's runner: per-round medians and 10th percentile.
  std::vector<double> candidate_call_cost_ms;
  double candidate_call_cost_low_ms = 0;
  // Removed from the candidate's samples: the lower of the two runners' costs (candidate_cost).
  double candidate_cost_removed_ms = 0;
  // The candidate's samples less its own runner's cost, where that is the higher of the two (else
  // empty): the upper end of the speedups' intervals (ProfileEvidence::reach_own_cost).
  RoundSamples candidate_at_own_cost;
  // The same null calls' host windows (the owner's host clock from the inputs' copy to the answer):
  // what the kernel trace's busy share removes from each call's host window. The same samples as
  // above under the host timer; under the GPU timer the windows also hold the messages.
  std::vector<double> candidate_null_window_ms;
  double candidate_window_cost_low_ms = 0;
  std::map<std::string, double> owner_ms;  // the owner's time around all calls, by phase
  // With call_diagnostics: per model of the rounds, per phase, each round's median (CallBatch).
  std::map<std::string, std::map<std::string, std::vector<double>>> call_phases_ms;
  // The rounds that ran, why they stopped ("fixed", "target", "time" or "max_rounds": adaptive
  // rounds, ProfileSettings::target_ci and rounds_seconds), and the interval's relative half-width
  // they last saw.
  int rounds_run = 0;
  std::string rounds_stop = "fixed";
  std::optional<double> rounds_half_width;
  std::int64_t checked_calls = 0;    // candidate calls whose output the owner judged
  std::int64_t baseline_mismatches = 0;  // compile calls that did not match eager (noted)
  std::string baseline_notes;
  std::vector<std::string> sandbox_layers;
  std::string candidate_stderr;
  std::string task_layout_json = "{}";
  int forwards_per_call = 1;  // this task's (TaskInfo::forwards: the settings', cut to fit memory)
  // Set when the candidate failed (FAIL_RUNTIME, FAIL_TIMEOUT, FAIL_INCORRECT, FAIL_RESOURCE,
  // REJECT_POLICY, FLAG_HACK).
  std::optional<std::pair<Verdict, std::string>> outcome;
  std::optional<CallStop> outcome_stop;  // the stop the outcome came from, when it did
  // The kernel trace: every call of the candidate's runner on the owner's clock, from its "ready"
  // (watch_start_ns) to its end; the analysis once the trace was read (read_kernel_trace_of).
  std::vector<SessionCall> runner_calls;
  std::uint64_t watch_start_ns = 0, watch_end_ns = 0;
  std::uint32_t runner_pid = 0;
  std::string kernels_status = "not traced";
  std::optional<KernelTrace> trace;
  KernelEvidence kernel_evidence;
  std::optional<KernelAnalysis> kernels;

  // Reads the candidate runner's trace at `path` and analyses it against runner_calls. A Status
  // when the analysis could not be made (the machinery); a trace that cannot vouch for the calls
  // is a gate in `kernels`, not a Status.
  Status analyze_trace(const std::string& path, const std::string& work_dir);
  // The "profile" value from whatever has been collected, with this verdict.
  ProfileOutcome finish(Verdict verdict, std::string reason);
  // Statistics, gates and the verdict from a completed measurement.
  ProfileOutcome decide();

 private:
  // Times and speedups with these candidate samples: paired, or unpaired from the store.
  Result<TimingReport> timing_report(const RoundSamples& candidate_samples) const;
  Status reach_own_cost(TimingReport& report) const;

  std::optional<TimingReport> report_;  // once the statistics are computed
  std::vector<GateFinding> flags_;
};

// One profile's rounds in the task's session. The candidate's runner must be attached; the
// baseline's is attached here when fresh baselines are wanted.
class Measurement {
 public:
  Measurement(const ProfileSettings& settings, Evaluator& evaluator, ProfileEvidence& evidence)
      : s_(settings), evaluator_(evaluator), evidence_(evidence) {}

  // Warm-up and rounds. A Status is a failure of the machinery (INFRA_ERROR); the candidate's
  // failures land in evidence.outcome and return ok.
  // `compile_available`: the baseline's runner has a torch.compile model (torch has it).
  Status run(const std::optional<BaselineSamples>& cached, bool compile_available);

 private:
  // One batch on an arm; a candidate failure (or a check that did not match) sets the outcome and
  // returns nullopt; a Status when the machinery failed.
  Result<std::optional<CallBatch>> batch(const std::string& arm, const std::string& model,
                                         const std::vector<std::uint64_t>& seeds, double timeout);
  // Warm-up batches until warmup_ms of calls; their calls are marked as such in the evidence.
  Status warm_up(const std::string& arm, const std::string& model, std::vector<double>& last_ms);
  Status warm_up_calls(const std::string& arm, const std::string& model, std::vector<double>& last_ms);
  Status rounds(const std::vector<std::string>& models, int calls, bool fresh,
                std::map<std::string, RoundSamples>& raw);
  // The relative half-width of the interval adaptive rounds watch, from the rounds so far; nullopt
  // when it cannot be computed yet.
  std::optional<double> interval_half_width(const std::map<std::string, RoundSamples>& raw, bool fresh) const;

  const ProfileSettings& s_;
  Evaluator& evaluator_;
  ProfileEvidence& evidence_;
  std::mt19937_64 rng_{std::random_device{}()};
  bool warming_up_ = false;
};

}  // namespace cudaagent
