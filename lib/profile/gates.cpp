// Sanity gates over measured facts. Each gate validates its inputs first (a NaN must never slip
// through a comparison as "not raised"), then compares with a strict inequality so a value exactly
// at a threshold passes, and states the comparison in its reason either way.
#include "cudaagent/profile/gates.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cudaagent {
namespace {

bool positive_finite(double x) { return std::isfinite(x) && x > 0; }
bool non_negative_finite(double x) { return std::isfinite(x) && x >= 0; }

std::string show(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", x);
  return text;
}

std::string percent(double fraction) { return show(fraction * 100) + "%"; }

}  // namespace

GateFinding gate_finding(std::string name, bool raised, bool withholds, std::string reason,
                         std::vector<GateNumber> numbers) {
  return GateFinding{std::move(name), raised, raised && withholds, std::move(reason), std::move(numbers)};
}

Result<GateFinding> check_speedup_ceiling(std::string_view baseline, double speedup, double max_speedup) {
  if (!positive_finite(speedup)) {
    return Status::error("speedup ceiling: the speedup over " + std::string(baseline) +
                         " must be a positive finite number");
  }
  if (!std::isfinite(max_speedup) || max_speedup <= 1) {
    return Status::error("speedup ceiling: the maximum speedup must be a finite number above 1");
  }
  const bool raised = speedup > max_speedup;
  const std::string comparison = "speedup " + show(speedup) + "x over " + std::string(baseline);
  return gate_finding("speedup_ceiling", raised, true,
                      raised ? comparison + " is above the " + show(max_speedup) +
                                   "x ceiling: too good to be true, reward withheld pending review"
                             : comparison + " is within the " + show(max_speedup) + "x ceiling",
                      {{"speedup", speedup}, {"max_speedup", max_speedup}});
}

Result<GateFinding> check_roofline_floor(const RooflineFacts& facts, double slack) {
  if (!positive_finite(facts.time_ms)) {
    return Status::error("roofline floor: the time must be a positive finite number of ms");
  }
  if (!non_negative_finite(facts.bytes) || !non_negative_finite(facts.flops)) {
    return Status::error("roofline floor: bytes and flops must be finite numbers >= 0");
  }
  if (!positive_finite(facts.bandwidth_bytes_per_s)) {
    return Status::error("roofline floor: the measured bandwidth must be a positive finite number");
  }
  if (!non_negative_finite(facts.flops_per_s) || (facts.flops > 0 && facts.flops_per_s == 0)) {
    return Status::error("roofline floor: flops need a positive finite measured FLOP/s");
  }
  if (facts.bytes == 0 && facts.flops == 0) {
    return Status::error("roofline floor: neither bytes nor flops given, nothing bounds the time");
  }
  if (!std::isfinite(slack) || slack <= 0 || slack > 1) {
    return Status::error("roofline floor: the slack must be in (0, 1]");
  }
  const double memory_ms = facts.bytes / facts.bandwidth_bytes_per_s * 1e3;
  const double compute_ms = facts.flops > 0 ? facts.flops / facts.flops_per_s * 1e3 : 0;
  const double floor_ms = std::max(memory_ms, compute_ms);
  const double threshold_ms = slack * floor_ms;
  const bool raised = facts.time_ms < threshold_ms;
  const std::string bound = memory_ms >= compute_ms ? "moving " + show(facts.bytes) + " bytes"
                                                    : "doing " + show(facts.flops) + " FLOP";
  const std::string comparison = "time " + show(facts.time_ms) + " ms against a floor of " +
                                 show(floor_ms) + " ms for " + bound + " (slack " + show(slack) + ")";
  return gate_finding("roofline_floor", raised, true,
                      raised ? comparison + ": faster than this GPU can go, reward withheld"
                             : comparison + ": physically possible",
                      {{"time_ms", facts.time_ms},
                       {"bytes", facts.bytes},
                       {"bandwidth_bytes_per_s", facts.bandwidth_bytes_per_s},
                       {"flops", facts.flops},
                       {"flops_per_s", facts.flops_per_s},
                       {"floor_ms", floor_ms},
                       {"slack", slack},
                       {"threshold_ms", threshold_ms}});
}

Result<KernelTime> kernel_time(std::span<const KernelSpan> kernels) {
  std::vector<KernelSpan> sorted(kernels.begin(), kernels.end());
  std::uint64_t sum_ns = 0, busy_ns = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i].end_ns < sorted[i].start_ns) {
      return Status::error("kernel time: kernel " + std::to_string(i) + " ends before it starts");
    }
    sum_ns += sorted[i].end_ns - sorted[i].start_ns;
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const KernelSpan& a, const KernelSpan& b) { return a.start_ns < b.start_ns; });
  // Sweep the spans in start order, merging each into the current run while they overlap.
  for (std::size_t i = 0; i < sorted.size();) {
    const std::uint64_t start = sorted[i].start_ns;
    std::uint64_t end = sorted[i].end_ns;
    for (++i; i < sorted.size() && sorted[i].start_ns <= end; ++i) end = std::max(end, sorted[i].end_ns);
    busy_ns += end - start;
  }
  return KernelTime{static_cast<double>(sum_ns) / 1e6, static_cast<double>(busy_ns) / 1e6,
                    static_cast<std::int64_t>(kernels.size())};
}

Result<std::vector<GateFinding>> check_timer_consistency(const TimerFacts& facts,
                                                         const GateSettings& settings) {
  if (!positive_finite(facts.event_ms) || !positive_finite(facts.host_ms)) {
    return Status::error("timer consistency: event and host times must be positive finite numbers of ms");
  }
  if (!non_negative_finite(facts.kernel_ms)) {
    return Status::error("timer consistency: the kernel time must be a finite number of ms >= 0");
  }
  const bool own_basis = !(facts.busy_window_ms < 0);  // NaN is an own basis, and an error below
  if (own_basis && (!non_negative_finite(facts.busy_kernel_ms) || !non_negative_finite(facts.busy_window_ms))) {
    return Status::error("timer consistency: the busy share's kernel time and window must be finite numbers of ms >= 0");
  }
  const double rel = settings.timer_relative_tolerance, abs = settings.timer_absolute_tolerance_ms;
  if (!non_negative_finite(rel) || !non_negative_finite(abs)) {
    return Status::error("timer consistency: tolerances must be finite numbers >= 0");
  }
  if (!std::isfinite(settings.min_busy_fraction) || settings.min_busy_fraction < 0 ||
      settings.min_busy_fraction > 1) {
    return Status::error("timer consistency: the minimum busy fraction must be in [0, 1]");
  }
  std::vector<GateFinding> flags;

  const double host_limit = facts.host_ms * (1 + rel) + abs;
  const bool event_over = facts.event_ms > host_limit;
  const std::string events = "events measured " + show(facts.event_ms) + " ms";
  flags.push_back(gate_finding(
      "event_exceeds_host", event_over, true,
      event_over ? events + ", more than the " + show(facts.host_ms) +
                       " ms the host clock saw around the same calls: the event times cannot be "
                       "genuine (forged or corrupted), reward withheld"
                 : events + " within the host clock's " + show(facts.host_ms) + " ms",
      {{"event_ms", facts.event_ms},
       {"host_ms", facts.host_ms},
       {"relative_tolerance", rel},
       {"absolute_tolerance_ms", abs},
       {"limit_ms", host_limit}}));

  const double event_limit = facts.event_ms * (1 + rel) + abs;
  const bool kernels_over = facts.kernel_ms > event_limit;
  const std::string kernels = "kernels ran " + show(facts.kernel_ms) + " ms";
  flags.push_back(gate_finding(
      "kernels_exceed_event", kernels_over, true,
      kernels_over ? kernels + " but the events measured " + show(facts.event_ms) +
                         " ms: work escaped the timed window (another stream or work left running "
                         "after the end mark), reward withheld"
                   : kernels + " within the events' " + show(facts.event_ms) + " ms",
      {{"kernel_ms", facts.kernel_ms},
       {"event_ms", facts.event_ms},
       {"relative_tolerance", rel},
       {"absolute_tolerance_ms", abs},
       {"limit_ms", event_limit}}));

  const double busy_kernel_ms = own_basis ? facts.busy_kernel_ms : facts.kernel_ms;
  const double busy_window_ms = own_basis ? facts.busy_window_ms : facts.event_ms;
  const bool judged = busy_window_ms > 0;
  const double busy = judged ? busy_kernel_ms / busy_window_ms : 1.0;
  const bool idle = judged && busy < settings.min_busy_fraction;
  const std::string share = !judged   ? "no timed window left to judge the busy share on"
                            : own_basis ? "kernels busy " + percent(busy) +
                                              " of the timed calls' time (warm-up calls and the cost of a call itself left out)"
                                        : "kernels busy " + percent(busy) + " of the event time";
  flags.push_back(gate_finding(
      "gpu_mostly_idle", idle, false,
      idle ? share + ", below " + percent(settings.min_busy_fraction) +
                 ": the GPU sat idle for most of the timed window (host work, sleeps, launch gaps or "
                 "a result computed on the CPU); it slows this arm's own time, recorded for review"
           : share,
      {{"kernel_ms", busy_kernel_ms},
       {"event_ms", busy_window_ms},
       {"busy_fraction", busy},
       {"min_busy_fraction", settings.min_busy_fraction}}));
  return flags;
}

Result<GateFinding> check_clock_stability(std::string_view clock, std::span<const double> readings_mhz,
                                          double max_change) {
  const std::string name(clock);
  if (readings_mhz.size() < 2) {
    return Status::error("clock stability: " + name + " clock needs at least 2 readings");
  }
  if (!std::all_of(readings_mhz.begin(), readings_mhz.end(), positive_finite)) {
    return Status::error("clock stability: " + name + " clock readings must be positive finite MHz");
  }
  if (!std::isfinite(max_change) || max_change < 0 || max_change >= 1) {
    return Status::error("clock stability: the maximum change must be in [0, 1)");
  }
  const auto [low, high] = std::minmax_element(readings_mhz.begin(), readings_mhz.end());
  const double change = (*high - *low) / *high;
  const bool raised = change > max_change;
  const std::string moved = name + " clock ranged " + show(*low) + "-" + show(*high) + " MHz (" +
                            percent(change) + ")";
  return gate_finding("clock_moved", raised, true,
                      raised ? moved + " during the block, more than " + percent(max_change) +
                                   ": its times are not comparable, reward withheld"
                             : moved + ", within " + percent(max_change),
                      {{"min_mhz", *low},
                       {"max_mhz", *high},
                       {"change", change},
                       {"max_change", max_change},
                       {"readings", static_cast<double>(readings_mhz.size())}});
}

bool withholds_reward(std::span<const GateFinding> flags) {
  return std::any_of(flags.begin(), flags.end(), [](const GateFinding& f) { return f.withholds_reward; });
}

std::string withholding_reason(std::span<const GateFinding> flags) {
  for (const auto& flag : flags) {
    if (flag.withholds_reward) return flag.name + ": " + flag.reason;
  }
  return "";
}

void write_gate_findings(JsonWriter& json, std::span<const GateFinding> flags) {
  json.begin_array();
  for (const auto& flag : flags) {
    json.begin_object()
        .field("name", std::string_view(flag.name))
        .field("raised", flag.raised)
        .field("withholds_reward", flag.withholds_reward)
        .field("reason", std::string_view(flag.reason))
        .key("numbers")
        .begin_object();
    for (const auto& number : flag.numbers) json.field(number.name, number.value);
    json.end_object().end_object();
  }
  json.end_array();
}

}  // namespace cudaagent
