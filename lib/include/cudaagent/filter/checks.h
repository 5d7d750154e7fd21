// The filter's judgement, apart from running anything: how a harness process ended, what its
// report says (its findings about the outputs included: share/harness/output_judge.py makes them
// where the outputs are) and whether the eager time is in the window. Pure functions of their
// arguments, so every rule is unit-tested without Python. The report is validated and bounded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/sandbox/process.h"

namespace cudaagent {

// One reason a task was rejected. `check` is one of: load, interface, init, inputs, eager,
// memory, disk, timeout, crash, output, non_finite, all_zero, constant, determinism,
// input_dependence, compile, eager_time.
struct FilterReason {
  std::string check;
  std::string detail;
  bool operator==(const FilterReason&) const = default;
};

// share/harness/filter_task.py's report.json, validated. Strings are cut to 2000 bytes.
struct HarnessReport {
  struct Error {
    std::string phase;
    std::string type;
    std::string message;
  };
  struct Compile {
    bool ok = false;
    std::string error;
    double seconds = 0;
  };
  // What the job found in its outputs. `findings` checks are among: output, non_finite,
  // all_zero, constant, determinism, input_dependence.
  struct Outputs {
    std::string determinism;  // "bitwise", "within tolerance", "no"; "" when not compared
    std::vector<FilterReason> findings;
    std::optional<std::string> compile_differs;  // "" a match, else why; nullopt: not compared
  };
  std::string mode;   // "check"
  std::string phase;  // the phase in progress, or the last one when done
  bool done = false;
  std::optional<Error> error;
  std::string torch;
  bool has_compile = false;
  std::optional<bool> inputs_equal;  // the two input draws were identical
  std::optional<Compile> compile;    // when torch.compile ran
  std::optional<Outputs> outputs;    // once the eager calls were judged
  std::int64_t warmup_calls = 0;     // eager's, once timed
  double warmup_max_ms = 0;
  std::vector<double> samples_ms;          // eager's timed calls: at most 1000 finite values >= 0
  std::vector<double> compile_samples_ms;  // the compiled model's, timed after eager's
  // Where the task's process says its seconds went, by phase: for people sizing a run, never for
  // a verdict. Phases are known ones.
  std::vector<std::pair<std::string, double>> phase_seconds;
  std::uint64_t peak_bytes = 0;  // torch's peak device memory in the job (0 on the CPU)
};

// Parses and validates a report: every field present with its type, `phase` one of the
// harness's phases, numbers finite. A Status saying what is wrong otherwise.
Result<HarnessReport> parse_harness_report(std::string_view json);

// How one harness process ended, as the filter sees it.
struct RunJudgement {
  enum class End {
    kCompleted,  // the report says done
    kRejected,   // the task failed: `reasons` say how
    kInfra,      // the machinery failed (the harness could not start or import torch): retry
  };
  End end = End::kInfra;
  std::vector<FilterReason> reasons;
  std::string infra_reason;
  std::string phase;  // where the process was when it ended ("" without a report)
};

// Judges a harness process from its result and its report (nullopt with `report_problem` when
// report.json was missing or invalid). An error in the task's phases is a reason named after the
// phase (forward -> eager), or "memory" when the message is an allocation failure ("disk" when
// the disk was full: "No space left on device"); a timeout is
// "timeout"; a signal or an exit without a complete report is "crash" ("memory" for SIGKILL, the
// OOM killer's signal). An error while importing torch, or no report at all, is infrastructure.
RunJudgement judge_run(const ProcessResult& process, const std::optional<HarnessReport>& report,
                       const std::string& report_problem);

// The job's findings as reasons: each finding, and what the compile comparison found when
// `judge_compile` (a compile failure, a mismatch, or no comparison although torch.compile ran).
// `determinism` and `compile_text` are set for the record. A report without findings is an
// "output" reason: the job ended its checks without judging them.
void judge_reported_outputs(const HarnessReport& report, bool judge_compile,
                            std::vector<FilterReason>& reasons, std::string& determinism,
                            std::string& compile_text);

struct EagerStats {
  double median_ms = 0;
  double min_ms = 0;
  double mean_ms = 0;
  double max_ms = 0;
  std::int64_t runs = 0;
};

// Statistics of the timing samples. A Status when there are none.
Result<EagerStats> eager_stats(const std::vector<double>& samples_ms);

// The "eager_time" reason when the median is outside [low_ms, high_ms], else nullopt.
std::optional<FilterReason> judge_window(const EagerStats& stats, double low_ms, double high_ms);

// Whether the reasons include a failure that other tasks' jobs sharing the device and the disk
// can cause: "memory" or "disk". Such a task deserves a run of its own before it is rejected.
bool failed_for_shared_resources(const std::vector<FilterReason>& reasons);

// "skipped: torch 1.13 has no torch.compile" for a torch version below 2 ("1.13.0a0"), else
// nullopt. Versions that do not parse are taken to have it.
std::optional<std::string> compile_unavailable(std::string_view torch_version);

// "0.0312 ms", "12.5 ms", "1235 ms": a duration for reasons, three significant digits below 1 s.
std::string format_ms(double ms);

}  // namespace cudaagent
