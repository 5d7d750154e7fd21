// Internal to profile.cpp: the evidence a profile collects and the rounds that collect it.
// ProfileEvidence turns what was measured into the "profile" value (statistics, gates, verdict);
// TimingRun drives the two timing sessions through share/harness/timing.py's commands.
#pragma once

#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cudaagent/device/gpu_query.h"
#include "cudaagent/profile/kernel_trace.h"
#include "cudaagent/profile/kernels.h"
#include "cudaagent/profile/profile.h"
#include "cudaagent/profile/report.h"
#include "cudaagent/profile/timing_report.h"
#include "cudaagent/sandbox/harness_worker.h"

namespace cudaagent {

struct ProfileJobDirs {
  std::string task;           // baseline-readable: the pristine model.py
  std::string baseline_out;   // baseline-writable: state/ (moved to the candidate), expect files
  std::string candidate_in;   // candidate-readable: work/ (built), task/model.py, state/
  std::string candidate_out;  // candidate-writable: its check outputs
  std::string private_dir;    // no sandbox sees it: copies of the candidate's files
};

struct HiddenCheck {
  int round = 0;
  int call = 0;
  bool match = false;
  bool fingerprint_match = false;
  double max_abs_error = 0;
  std::string reason;
};

struct ProfileEvidence {
  const ProfileSettings* settings = nullptr;
  const TorchEnv* torch = nullptr;
  std::chrono::steady_clock::time_point started;
  std::string snapshot_hash;
  std::vector<std::pair<std::string, double>> timings;
  bool build_cached = false;
  std::string baseline_key;
  std::vector<Result<GpuReading>> clocks;  // before, mid-block, after (CUDA only)

  BaselineSamples baselines;
  bool baselines_cached = false;
  bool baselines_sound = false;  // complete, from this run: fit for the store
  bool baselines_stored = false;
  bool rechecked = false;  // a second measurement, because stored baselines flagged the candidate
  std::string baseline_device_json = "{}";
  RoundSamples candidate;
  RoundClocks candidate_clocks;
  std::vector<HiddenCheck> checks;
  std::optional<double> persisting_l2_bytes;  // largest the candidate's process reported
  std::string candidate_init_json = "{}";
  std::string candidate_stderr;
  // --kernel-trace: the candidate's commands on this side's CLOCK_MONOTONIC (rounds with the
  // harness's call marks), its process id as it reported it, and the trace read after the session.
  std::vector<TracedRound> traced_rounds;
  std::vector<HostWindow> candidate_commands;  // rounds and hidden checks
  HostWindow trace_watch;                      // end of the candidate's init .. start of its flush
  std::uint32_t candidate_pid = 0;
  std::string candidate_work;                  // the built workspace: the candidate's objects
  std::optional<KernelTrace> kernel_trace;
  std::string kernel_trace_error;              // why there is no trace
  // Set by TimingRun when the candidate failed (FAIL_RUNTIME, FAIL_TIMEOUT, FAIL_INCORRECT,
  // FLAG_HACK for a reply that cannot be an honest harness's).
  std::optional<std::pair<Verdict, std::string>> outcome;

  // The "profile" value from whatever has been collected, with this verdict.
  ProfileOutcome finish(Verdict verdict, std::string reason);
  // Statistics, gates and the verdict from a completed measurement.
  ProfileOutcome decide();

 private:
  bool tracing() const;
  KernelEvidence kernel_evidence() const;
  std::optional<TimingReport> report_;  // once the statistics are computed
  std::optional<KernelAnalysis> kernels_;  // once the kernel gates ran
  std::vector<GateFinding> flags_;
};

class TimingRun {
 public:
  TimingRun(const ProfileSettings& settings, std::mt19937_64& rng, const ProfileJobDirs& dirs,
            ProfileEvidence& evidence)
      : s_(settings), rng_(rng), dirs_(dirs), evidence_(evidence) {}

  // Runs both sessions and every round. A Status is a failure of the machinery (INFRA_ERROR);
  // candidate failures land in evidence.outcome and return ok.
  Status measure(HarnessWorker& baseline, HarnessWorker& candidate,
                 const std::optional<BaselineSamples>& cached, const std::string& gpu_index);

 private:
  struct Reply {
    enum class Kind { kOk, kRefused, kEnded, kTimeout, kMalformed };
    Kind kind = Kind::kMalformed;
    std::string text;   // the JSON line
    std::string error;  // kRefused: the process's error; kEnded: how it ended and its output
    std::string output; // kEnded: the tail of the process's captured output
    double host_ms = 0;
    HostWindow window;  // CLOCK_MONOTONIC, before the command was sent .. after the reply was read
  };
  Result<Reply> exchange(HarnessSession& session, const std::string& command, double timeout_seconds);
  HarnessJob timing_job(const std::string& role, const std::string& compile_mode) const;
  Status candidate_failed(HarnessSession& session, const Reply& reply, const std::string& what);
  void flush_kernel_trace(HarnessSession& candidate);
  void read_kernel_trace_file();
  Status check_round(HarnessSession& baseline, HarnessSession& candidate, int round,
                     const std::vector<std::uint64_t>& seeds, const std::vector<std::optional<double>>& sums);

  const ProfileSettings& s_;
  std::mt19937_64& rng_;
  const ProfileJobDirs& dirs_;
  ProfileEvidence& evidence_;
};

}  // namespace cudaagent
