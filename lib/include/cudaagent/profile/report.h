// The pure parts of cudaagent-profile: how many calls a round holds, the speedup from cached
// (unpaired) baselines, the host-clock gate on the candidate's own timer, output fingerprints, the
// cached baseline entry, and the --brief text. Key choice: everything here is a function of
// numbers and JSON, so each decision is unit-tested without a GPU or a Python process.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/candidate/tensor_file.h"
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

// One arm's rounds as the driver saw them: the events it reported, summed per round, and the host
// clock around each round (from sending the command to reading the reply).
struct RoundClocks {
  std::vector<double> event_ms;  // per round, sum of the reported per-call times
  std::vector<double> host_ms;   // per round
};

struct OverheadSettings {
  // The candidate's host overhead per round (host - events) may exceed the baseline's by at most
  // max(relative_events x its own event time per round, relative_overhead x the baseline's
  // overhead, absolute_ms). Honest arms run the same harness loop, input generation and
  // fingerprinting, so their overheads differ only by noise.
  double relative_events = 0.25;
  // Half the baseline's own overhead: on a loaded CPU, input generation dominates the overhead and
  // honest candidates were seen up to 35% above the baseline (2 shared cores, other builds running).
  double relative_overhead = 0.5;
  double absolute_ms = 2.0;
};

// "host_overhead_excess" (withholds): the candidate's timer left out time the host clock saw. Its
// time outside the reported calls (host - events) exceeds the baseline's (same harness, clean
// process) by more than the tolerance — the median of per-round differences when both have the
// same rounds (paired), else the difference of the medians: its events were forged low (a patched
// torch.cuda.Event or time.perf_counter, research §7 case 24), or work was moved outside the timed
// calls (precomputed while its inputs were generated, finished after the end mark on the host).
// Errors: empty or unequal round lists, non-finite or negative times, bad settings.
Result<GateFinding> check_host_overhead(const RoundClocks& candidate, const RoundClocks& baseline,
                                        const OverheadSettings& settings);

// What a hidden check recomputes from an output file: the float64 sum of every element of every
// tensor (and of plain numbers), and the sum of magnitudes for the tolerance.
struct OutputFingerprint {
  double sum = 0;
  double magnitude = 0;
  bool finite = true;  // false when a NaN or infinity was summed
};
OutputFingerprint output_fingerprint(const TensorTree& tree);
// Whether the sum the timing process reported for a call (null: not finite) is the sum of the
// output it later wrote for that call: |reported - sum| <= 1e-6 x magnitude + 1e-9; a non-finite
// output matches only a null report.
bool fingerprint_matches(std::optional<double> reported, const OutputFingerprint& computed);

// Baseline samples as cached in the store (stage "profile-baseline").
struct BaselineSamples {
  RoundSamples eager;
  RoundSamples compile;          // empty: not measured
  std::string compile_status;    // "measured", or why not
  RoundClocks eager_clocks;
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
