// The pure parts of cudaagent-profile: how many calls a round holds, the speedup from cached
// (unpaired) baselines, the cached baseline entry, and the --brief text. Key choice: everything here is a function of
// numbers and JSON, so each decision is unit-tested without a GPU or a Python process.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/profile/gates.h"
#include "cudaagent/profile/timing_stats.h"

namespace cudaagent {

// Calls per round: enough for `round_ms` of timed work at `ms_per_call`, within [min_calls,
// max_calls], and no more input sets than fit `pool_bytes` (each call gets its own fresh inputs,
// all alive during the round) — but never fewer than min_calls. Non-positive or non-finite
// ms_per_call gives max_calls (a call too fast to see); input_bytes 0 means no memory bound.
int calls_per_round(double ms_per_call, double round_ms, int min_calls, int max_calls,
                    double input_bytes, double pool_bytes);

// Speedup from baselines measured in another run (the store): no rounds to pair, so the point is
// the ratio of medians and the interval the conservative ratio of the time intervals,
// [baseline low / candidate high, baseline high / candidate low] (both 95% intervals, so this
// covers at least as well as each). `rounds` is the candidate's; round_ratios stays empty.
SpeedupSummary unpaired_speedup(const TimeSummary& baseline, const TimeSummary& candidate);

// Baseline samples as cached in the store (stage "profile-baseline").
struct BaselineSamples {
  RoundSamples eager;
  RoundSamples compile;          // empty: not measured
  std::string compile_status;    // "measured", or why not
  int calls_per_round = 0;
  double input_bytes = 0;
  double output_bytes = 0;
  std::string device_json = "{}";  // what the baseline process said about its device
};
std::string baseline_json(const BaselineSamples& samples);
// The inverse; a Status naming what is missing or malformed.
Result<BaselineSamples> parse_baseline(std::string_view json);

// The --brief text from a record's profile value: a few plain lines for the agent (times,
// speedups with intervals, flags raised, what to look at). Never fails: missing parts are said.
std::string brief_text(simdjson::dom::element profile);

}  // namespace cudaagent
