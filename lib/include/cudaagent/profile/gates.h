// Sanity gates on a profile's measurements (cudaagent(7), TIMING; attack catalog
// cases 24, 25, 38-43): a result that is too good to be true, faster than physics, or measured by
// clocks that disagree earns no reward. Key choice: each gate is a pure function of measured facts
// that returns what it compared, the numbers it used and why, passed or raised, so every decision
// can be stored with the profile and audited later.
//
// What the tool does with a raised flag: any raised flag with withholds_reward means the profile's
// verdict is FLAG_HACK (reward withheld pending review). The gates cannot tell an attack from a
// broken environment (a throttling GPU, a harness bug); where a retry is cheap, the tool may
// re-measure a block first and flag only if the finding persists. Notes (withholds_reward false)
// are recorded only.
//
// All functions are pure and thread-safe. Bad facts (NaN, infinite, negative where a time or a size
// must be positive) and bad settings are Status errors, never a silent pass.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/status.h"

namespace cudaagent {

// One named number a gate used (an input or a threshold), kept in the order the gate lists them.
struct GateNumber {
  std::string name;
  double value = 0;
};

// The outcome of one gate, raised or not.
struct GateFinding {
  std::string name;               // "speedup_ceiling", "roofline_floor", ... (see each gate)
  bool raised = false;
  bool withholds_reward = false;  // raised and this gate withholds the reward (FLAG_HACK)
  std::string reason;             // for people: what was compared and what it means
  std::vector<GateNumber> numbers;
};

// A gate's finding; it withholds the reward only when it is raised and the gate is one that does.
GateFinding gate_finding(std::string name, bool raised, bool withholds, std::string reason,
                         std::vector<GateNumber> numbers);

struct GateSettings {
  // Speedup over eager above which a result is too good to be true (KernelBench's default, 10x).
  double max_speedup = 10.0;
  // A time below roofline_slack x the roofline floor is flagged. 0.5: flagged only when the implied
  // bandwidth (or FLOP rate) is more than twice the measured one, leaving room for writes absorbed
  // by L2 (up to its size, outputs need not reach DRAM inside the timed window) and for a
  // bandwidth measured below the true peak.
  double roofline_slack = 0.5;
  // Two clocks of one block must agree within relative + absolute tolerance: CUDA events resolve
  // about 0.5 us and CUPTI and the host clock differ in when they start counting.
  double timer_relative_tolerance = 0.05;
  double timer_absolute_tolerance_ms = 0.01;
  // Below this fraction of the event time spent in kernels, the GPU was mostly idle (a note).
  double min_busy_fraction = 0.5;
  // A block whose SM (or memory) clock readings spread more than this fraction is not comparable.
  double max_clock_change = 0.05;
};

// "speedup_ceiling" (withholds): raised when speedup > max_speedup (strictly; exactly the ceiling
// passes). Use the point estimate over eager: a real 10x is rare enough to deserve review.
// Errors: speedup not a positive finite number; max_speedup not finite or <= 1.
Result<GateFinding> check_speedup_ceiling(std::string_view baseline, double speedup, double max_speedup);

// What bounds a computation's time from below on this device.
struct RooflineFacts {
  double time_ms = 0;                // the candidate's median time per call
  double bytes = 0;                  // bytes it must move at least: inputs read + outputs written
  double bandwidth_bytes_per_s = 0;  // device memory bandwidth measured on this GPU
  double flops = 0;                  // floating-point operations it must do (0: not known)
  double flops_per_s = 0;            // FLOP/s measured on this GPU for the dtype (0: not known)
};

// "roofline_floor" (withholds): floor_ms = max(bytes / bandwidth, flops / flops_per_s) in ms;
// raised when time_ms < slack x floor_ms (strictly). `bytes` must be what the computation cannot
// avoid: an input the result does not depend on is no floor. Errors: time not positive finite;
// bytes, flops negative or not finite; bandwidth not positive finite; flops > 0 without a positive
// flops_per_s; both bounds zero; slack not in (0, 1].
Result<GateFinding> check_roofline_floor(const RooflineFacts& facts, double slack);

// One CUPTI kernel record: start and end on the GPU's clock, ns.
struct KernelSpan {
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
};
struct KernelTime {
  double sum_ms = 0;   // sum of kernel durations
  double busy_ms = 0;  // length of the union of the spans: time the GPU ran at least one kernel
  std::int64_t kernels = 0;
};
// Sum and busy time of a block's kernels, on every stream. Compare busy_ms, not sum_ms, with the
// event time: kernels on concurrent streams overlap, so their sum may honestly exceed the wall time
// they took. Errors: a span that ends before it starts.
Result<KernelTime> kernel_time(std::span<const KernelSpan> kernels);

// Three clocks of the same timed block (the same calls), in ms.
struct TimerFacts {
  double event_ms = 0;   // CUDA events around each call (end mark after a device-wide sync), summed
  double host_ms = 0;    // the trusted host clock around the same calls (includes launch and sync)
  double kernel_ms = 0;  // KernelTime::busy_ms of the kernels CUPTI saw in that host window
  // What the busy share is judged on where it differs from kernel_ms over event_ms (busy_window_ms
  // negative: it does not). The profile session leaves its warm-up calls and the cost of a call
  // itself out (kernels.h, TracedRound); a window of 0 has no share to judge.
  double busy_kernel_ms = 0;
  double busy_window_ms = -1;
};

// Three gates, in this order:
// "event_exceeds_host" (withholds): event_ms > host_ms (1 + rel) + abs. The events are recorded
//   inside the host window, so this cannot happen honestly: the timings were forged or corrupted
//   (attack catalog cases 24, 25).
// "kernels_exceed_event" (withholds): kernel_ms > event_ms (1 + rel) + abs. The GPU ran this
//   block's kernels for longer than the events saw: work escaped the timed window (a stream the
//   marks did not cover, work left running after the end mark; §2.3 A4, A5).
// "gpu_mostly_idle" (note, never withholds): kernel_ms < min_busy_fraction x event_ms (or the busy
//   basis, where one is given). The timed
//   window was mostly idle GPU: host work, a sleep, launch gaps of tiny kernels (usual for eager
//   PyTorch on small problems) or a result computed on the CPU and copied (§7 case 44). Idle time
//   is inside the event time, so it slows the measured arm and gains it nothing; for the candidate
//   it is worth a review of policy (GPU work required), for a baseline it explains a slow baseline.
// Errors: event_ms or host_ms not positive finite; kernel_ms (or a given busy basis) negative or
// not finite; negative or non-finite tolerances; min_busy_fraction outside [0, 1].
Result<std::vector<GateFinding>> check_timer_consistency(const TimerFacts& facts,
                                                         const GateSettings& settings);

// "clock_moved" (withholds): readings of one clock (e.g. "sm" or "memory") taken before, during and
// after a timed block, MHz; change = (max - min) / max; raised when change > max_change (strictly).
// A moved clock makes the block's times incomparable with the other arm's (the GPU's clocks
// cannot be locked on the test machine, so blocks are checked instead). Errors: fewer than 2
// readings, a reading not positive finite, max_change outside [0, 1).
Result<GateFinding> check_clock_stability(std::string_view clock, std::span<const double> readings_mhz,
                                          double max_change);

// Whether any raised flag withholds the reward; the first such flag's reason, or "" if none.
bool withholds_reward(std::span<const GateFinding> flags);
std::string withholding_reason(std::span<const GateFinding> flags);

// [{"name", "raised", "withholds_reward", "reason", "numbers": {name: value, ...}}, ...] — every
// gate, raised or not, so the profile records what was checked. Non-finite numbers become null.
void write_gate_findings(JsonWriter& json, std::span<const GateFinding> flags);

}  // namespace cudaagent
