// The timing part of a profile record: summaries of eager, torch.compile and candidate times and
// the paired speedups, built from raw round samples, and written as the JSON that cudaagent-reward
// reads (profile.times_ms.*, profile.speedup.*; man/cudaagent-records.5). Key choice: the same
// writer for every number, so a non-finite value becomes null and never NaN.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/status.h"
#include "cudaagent/profile/timing_stats.h"

namespace cudaagent {

// Raw samples of one profile, in ms, grouped by the alternating rounds they ran in. Round r of
// each baseline ran next to round r of the candidate.
struct TimingSamples {
  RoundSamples eager;
  RoundSamples compile;  // empty: torch.compile was not measured
  RoundSamples candidate;
};

struct TimingReport {
  TimeSummary eager;
  std::optional<TimeSummary> compile;
  TimeSummary candidate;
  SpeedupSummary speedup_eager;                   // eager time / candidate time
  std::optional<SpeedupSummary> speedup_compile;  // compile time / candidate time
};

// Summaries and speedups of every arm. Each quantity gets its own PRNG stream derived from
// settings.seed, so the report is deterministic and no two intervals share their draws.
// Errors (Status, naming the arm): any error of summarize_times or estimate_speedup (empty or
// non-finite samples, unpaired round counts, fewer than 2 rounds).
Result<TimingReport> build_timing_report(const TimingSamples& samples, const BootstrapSettings& settings);

// Each speedup's interval of `report` reaches up to the upper end of the same speedup in `at_other_cost`
// (the same rounds with a lower cost of a call removed from the candidate's samples); nothing else
// moves: the median and the lower end, which the reward reads, stay the report's own.
void reach_upper_ends(TimingReport& report, const TimingReport& at_other_cost);

// {"median", "ci95": [low, high], "cv", "cv_within_round", "trials", "rounds", "outliers",
//  "mean", "min", "max"}; times in ms.
// Samples as JSON: rounds as an array of arrays, a list as an array (numbers as JsonWriter writes them).
void write_rounds(JsonWriter& json, const RoundSamples& rounds);
void write_list(JsonWriter& json, const std::vector<double>& values);
void write_time_summary(JsonWriter& json, const TimeSummary& summary);
// {"median", "ci95": [low, high], "rounds", "round_ratios": [...]}.
void write_speedup_summary(JsonWriter& json, const SpeedupSummary& speedup);
// Writes the two keys "times_ms" {eager, compile, candidate} and "speedup" {eager, compile} into
// the object `json` has open; compile is null when it was not measured.
void write_timing_fields(JsonWriter& json, const TimingReport& report);
// The same as one JSON object: {"times_ms": {...}, "speedup": {...}}.
std::string timing_json(const TimingReport& report);

}  // namespace cudaagent
