// Reading a candidate's kernel trace against the trusted round windows (profile_kernels.h). Each
// activity is cut against three sorted, merged window sets — the timed calls (strict, for the
// kernel time and the provenance table), the calls widened by the edge tolerance (for escapes
// inside a round), and the candidate's commands (for work while it had none) — by binary search,
// so a trace of millions of records costs a few passes.
#include "cudaagent/profile/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace cudaagent {
namespace {

using Span = std::pair<std::uint64_t, std::uint64_t>;

// Calls without a record allowed before trace_work_unrecorded is raised (or 2% of the calls).
constexpr std::uint64_t kUnrecordedMargin = 16;

std::string three_digits(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

std::string percent_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * x);
  return text;
}

double ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// Sorted by start, overlapping or touching spans joined.
std::vector<Span> merged(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Span> out;
  for (const Span& s : spans) {
    if (s.second < s.first) continue;
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

// Length of [lo, hi) covered by `spans` (merged).
std::uint64_t covered(std::uint64_t lo, std::uint64_t hi, const std::vector<Span>& spans) {
  if (hi <= lo) return 0;
  auto it = std::partition_point(spans.begin(), spans.end(), [&](const Span& s) { return s.second <= lo; });
  std::uint64_t total = 0;
  for (; it != spans.end() && it->first < hi; ++it) total += std::min(hi, it->second) - std::max(lo, it->first);
  return total;
}

std::uint64_t busy(std::vector<Span> spans) {
  std::uint64_t total = 0;
  for (const Span& s : merged(std::move(spans))) total += s.second - s.first;
  return total;
}

// A call window with its round, for the strict cut.
struct Call {
  Span span;
  std::size_t round = 0;
};

// Whether a round's marks can be used: as many as asked, each inside the trusted round window,
// in order, not overlapping. Empty `why` when they can.
std::string check_marks(const TracedRound& round) {
  if (round.calls.size() != round.expected_calls) {
    return std::to_string(round.calls.size()) + " call marks for " + std::to_string(round.expected_calls) + " calls";
  }
  std::uint64_t previous_end = round.host.start_ns;
  for (std::size_t k = 0; k < round.calls.size(); ++k) {
    const HostWindow& call = round.calls[k];
    if (call.end_ns < call.start_ns) return "call " + std::to_string(k) + " ends before it starts";
    if (call.start_ns < previous_end) {
      return "call " + std::to_string(k) + " starts before " + (k == 0 ? "the round" : "the previous call ended");
    }
    if (call.end_ns > round.host.end_ns) return "call " + std::to_string(k) + " ends after the round's reply";
    previous_end = call.end_ns;
  }
  return {};
}

const TraceProcessSummary* summary_of(const KernelTrace& trace, std::uint32_t pid) {
  for (const auto& s : trace.summaries) {
    if (s.pid == pid) return &s;
  }
  return nullptr;
}

void health_flags(const KernelEvidence& e, std::vector<GateFinding>& flags) {
  const KernelTrace& trace = *e.trace;
  const TraceProcessSummary* own = e.main_tid == 0 ? nullptr : summary_of(trace, e.main_tid);
  std::string missing;
  if (trace.summaries.empty()) {
    missing = "the trace has no summary line (the process was not flushed, or its lines were removed)";
  } else if (own == nullptr) {
    missing = "no summary line of the timing process (pid " + std::to_string(e.main_tid) + ")";
  } else if (trace.after_last_summary > 0) {
    missing = std::to_string(trace.after_last_summary) + " records after the last summary line (never covered by a flush)";
  } else if (own->clock != "monotonic" && own->clock != "monotonic_offset") {
    missing = "the summary's clock '" + own->clock + "' is not comparable with the host's";
  }
  flags.push_back(gate_finding(
      "trace_summary_missing", !missing.empty(), true,
      missing.empty() ? "the timing process's summary line covers the trace"
                      : missing + ": the trace cannot vouch for the timed work, reward withheld",
      {{"processes", static_cast<double>(trace.summaries.size())},
       {"after_last_summary", static_cast<double>(trace.after_last_summary)}}));

  const bool rejected = trace.rejected > 0 || trace.truncated || trace.error_lines > 0;
  std::string why;
  if (trace.rejected > 0) {
    why = std::to_string(trace.rejected) + " lines rejected" +
          (trace.problems.empty() ? "" : " (line " + std::to_string(trace.problems.front().line) + ": " +
                                            trace.problems.front().reason + ")");
  }
  if (trace.truncated) why += std::string(why.empty() ? "" : "; ") + "the trace is over the size cap";
  if (trace.error_lines > 0) {
    why += std::string(why.empty() ? "" : "; ") + std::to_string(trace.error_lines) + " error lines" +
           (trace.errors.empty() ? "" : " (" + trace.errors.front() + ")");
  }
  flags.push_back(gate_finding("trace_lines_rejected", rejected, true,
                               rejected ? why + ": the trace cannot vouch for the timed work, reward withheld"
                                        : std::to_string(trace.lines) + " lines, none rejected",
                               {{"lines", static_cast<double>(trace.lines)},
                                {"rejected", static_cast<double>(trace.rejected)},
                                {"error_lines", static_cast<double>(trace.error_lines)},
                                {"truncated", trace.truncated ? 1.0 : 0.0}}));

  const TraceLosses losses = trace_losses(trace);
  const std::uint64_t lost = losses.dropped + losses.buffer_errors + losses.write_failures + losses.missing;
  flags.push_back(gate_finding(
      "trace_records_lost", lost > 0, true,
      lost > 0 ? "records lost: " + std::to_string(losses.dropped) + " dropped by CUPTI, " +
                     std::to_string(losses.buffer_errors) + " buffer errors, " +
                     std::to_string(losses.write_failures) + " failed writes, " + std::to_string(losses.missing) +
                     " announced but not in the file: the trace cannot vouch for the timed work, reward withheld"
               : "no records lost",
      {{"dropped", static_cast<double>(losses.dropped)},
       {"buffer_errors", static_cast<double>(losses.buffer_errors)},
       {"write_failures", static_cast<double>(losses.write_failures)},
       {"missing", static_cast<double>(losses.missing)}}));

  // Every launch, copy and memset call the callbacks saw should have left a record. Activity
  // recording switched off inside the process (the candidate reaching CUPTI) leaves calls without
  // records while the callbacks go on counting; failed launches and empty copies leave a few, so
  // a margin is allowed.
  const std::uint64_t unrecorded = losses.launches > losses.records ? losses.launches - losses.records : 0;
  const std::uint64_t margin = std::max<std::uint64_t>(kUnrecordedMargin, losses.launches / 50);
  const bool gap = unrecorded > margin;
  flags.push_back(gate_finding(
      "trace_work_unrecorded", gap, true,
      gap ? std::to_string(unrecorded) + " of " + std::to_string(losses.launches) +
                " launch, copy and memset calls left no record (activity recording switched off inside "
                "the process?): the trace cannot vouch for the timed work, reward withheld"
          : std::to_string(losses.records) + " records for " + std::to_string(losses.launches) + " launch, copy and memset calls",
      {{"launches", static_cast<double>(losses.launches)},
       {"records", static_cast<double>(losses.records)},
       {"margin", static_cast<double>(margin)}}));
}

// output_marks_missing and work_after_output, over every call (warm-up ones too).
void output_mark_flags(const KernelEvidence& e, const std::vector<Call>& calls, const KernelPolicy& policy,
                       KernelAnalysis& a) {
  std::vector<OutputWindow> windows;
  for (const Call& call : calls) windows.push_back({call.span.first, call.span.second});
  const auto tolerance = static_cast<std::uint64_t>(std::llround(policy.output_tolerance_ms * 1e6));
  a.output = check_output_marks(*e.trace, e.main_tid, windows, tolerance);
  const OutputMarkFacts& o = a.output;
  const bool unmarked = o.unmarked_calls > 0;
  a.flags.push_back(gate_finding(
      "output_marks_missing", unmarked, true,
      unmarked ? std::to_string(o.unmarked_calls) + " of " + std::to_string(o.calls) +
                     " timed calls have no output mark with a copy after it in the trace: whether the forward's "
                     "work had finished when its output was copied cannot be told, reward withheld"
               : "every timed call's output marks have their copies (" + std::to_string(o.marks) + " marks)",
      {{"calls", static_cast<double>(o.calls)},
       {"marks", static_cast<double>(o.marks)},
       {"unmarked_calls", static_cast<double>(o.unmarked_calls)}}));
  const bool late = o.after_output_ns > 0 || o.after_mark_elsewhere_ns > 0;
  a.flags.push_back(gate_finding(
      "work_after_output", late, true,
      late ? std::to_string(o.late_activities) + " pieces of a forward's GPU work ran " + three_digits(ms(o.after_output_ns)) +
                 " ms past the start of its output's copy, and " + three_digits(ms(o.after_mark_elsewhere_ns)) +
                 " ms were launched after it on another stream: work left on a stream never joined back to the "
                 "caller's runs past the timed window, reward withheld"
           : "every forward's work had finished when its output was copied",
      {{"after_output_ms", ms(o.after_output_ns)},
       {"after_mark_elsewhere_ms", ms(o.after_mark_elsewhere_ns)},
       {"output_tolerance_ms", policy.output_tolerance_ms}}));
}

}  // namespace

KernelEvidence session_kernel_evidence(const KernelTrace* trace, std::string trace_error, std::uint32_t runner_pid,
                                       const std::vector<SessionCall>& calls, HostWindow watch,
                                       SummarySettings summary, double call_cost_ms) {
  KernelEvidence e;
  e.trace = trace;
  e.trace_error = std::move(trace_error);
  e.main_tid = runner_pid;
  e.watch = watch;
  e.summary = std::move(summary);
  for (const SessionCall& call : calls) {
    if (call.window.end_ns <= call.window.start_ns) continue;  // no window: its work is "between"
    e.commands.push_back(call.window);
    if (!call.candidate) continue;
    TracedRound round;
    round.host = call.window;
    round.calls = {call.window};
    round.expected_calls = 1;
    // The owner's clock is the only timer: the "event" time of the consistency checks is it too.
    round.event_ms = ms(call.window.end_ns - std::min(call.window.end_ns, call.window.start_ns));
    round.warm_up = call.warm_up;
    round.call_cost_ms = std::isfinite(call_cost_ms) ? std::max(call_cost_ms, 0.0) : 0.0;
    e.rounds.push_back(std::move(round));
  }
  e.output_marks = true;
  return e;
}

Result<KernelAnalysis> analyze_kernels(const KernelEvidence& e, const GateSettings& flag_settings,
                                       const KernelPolicy& policy) {
  for (double x : {policy.max_fallback_share, policy.max_unattributed_share}) {
    if (!std::isfinite(x) || x < 0 || x > 1) return Status::error("kernel policy: shares must be in [0, 1]");
  }
  for (double x : {policy.edge_tolerance_ms, policy.output_tolerance_ms}) {
    if (!std::isfinite(x) || x < 0) return Status::error("kernel policy: tolerances must be finite numbers of ms >= 0");
  }
  KernelAnalysis a;
  if (e.trace == nullptr) {
    const std::string why = e.trace_error.empty() ? "not written" : e.trace_error;
    a.flags.push_back(gate_finding(
        "trace_summary_missing", true, true,
        "no kernel trace (" + why + "): the trace cannot vouch for the timed work, reward withheld", {}));
    return a;
  }
  const KernelTrace& trace = *e.trace;
  health_flags(e, a.flags);
  const auto tol = static_cast<std::uint64_t>(std::llround(policy.edge_tolerance_ms * 1e6));
  const auto widen = [tol](Span s) { return Span{s.first > tol ? s.first - tol : 0, s.second + tol}; };

  // 1. The windows. A round whose marks are unusable counts as one call spanning the round.
  std::vector<Call> calls;
  std::vector<Span> rounds, wide_calls;
  std::string bad_marks;
  for (std::size_t r = 0; r < e.rounds.size(); ++r) {
    const TracedRound& round = e.rounds[r];
    const Span host{round.host.start_ns, round.host.end_ns};
    rounds.push_back(host);
    const std::string why = check_marks(round);
    if (!why.empty() && bad_marks.empty()) bad_marks = "round " + std::to_string(r) + ": " + why;
    if (!why.empty()) {
      calls.push_back({host, r});
      wide_calls.push_back(host);
      continue;
    }
    for (const HostWindow& call : round.calls) {
      calls.push_back({{call.start_ns, call.end_ns}, r});
      const Span wide = widen({call.start_ns, call.end_ns});
      wide_calls.push_back({std::max(wide.first, host.first), std::min(wide.second, host.second)});
    }
  }
  a.marks_valid = bad_marks.empty();
  a.calls = calls.size();
  std::sort(calls.begin(), calls.end(), [](const Call& x, const Call& y) { return x.span < y.span; });
  rounds = merged(std::move(rounds));
  wide_calls = merged(std::move(wide_calls));
  std::vector<Span> commands;
  for (const HostWindow& c : e.commands) commands.push_back(widen({c.start_ns, c.end_ns}));
  commands = merged(std::move(commands));
  const std::vector<Span> watch = e.watch.end_ns > e.watch.start_ns
                                      ? std::vector<Span>{{e.watch.start_ns, e.watch.end_ns}}
                                      : std::vector<Span>{};

  // 2. Classes of launchers and names, as summarize_trace gives them.
  std::vector<LauncherClass> launcher_class(trace.launchers.size());
  for (std::size_t i = 0; i < trace.launchers.size(); ++i) {
    launcher_class[i] = classify_launcher(trace.launchers[i], e.summary.classify);
  }
  const auto class_of = [&](const TraceActivity& act) {
    if (act.launcher != kNoLauncher && act.launcher < launcher_class.size()) return launcher_class[act.launcher];
    if (act.name < trace.names.size()) {
      return classify_kernel_name(trace.names[act.name], act.name < trace.demangled.size() ? trace.demangled[act.name] : "");
    }
    return LauncherClass::unknown;
  };

  // 3. One pass over the activities.
  KernelTrace timed;
  timed.names = trace.names;
  timed.demangled = trace.demangled;
  timed.launchers = trace.launchers;
  std::vector<std::vector<Span>> round_kernels(e.rounds.size());
  std::uint64_t kernel_total = 0;
  for (const TraceActivity& act : trace.activities) {
    const std::uint64_t lo = act.start_ns, hi = act.end_ns;
    const LauncherClass c = class_of(act);
    // Strict cut by the timed calls.
    auto it = std::partition_point(calls.begin(), calls.end(), [&](const Call& x) { return x.span.second < lo; });
    for (; it != calls.end() && it->span.first <= hi; ++it) {
      const std::uint64_t p0 = std::max(lo, it->span.first), p1 = std::min(hi, it->span.second);
      if (lo >= it->span.first && lo <= it->span.second && hi > it->span.second + tol) {
        a.after_end_ns += hi - it->span.second;
      }
      if (p1 < p0 || (p1 == p0 && hi > lo)) continue;  // touches the edge only
      TraceActivity piece = act;
      piece.start_ns = std::max<std::uint64_t>(p0, 1);
      piece.end_ns = std::max(p1, piece.start_ns);
      timed.activities.push_back(piece);
      if (act.kind == TraceKind::kernel) {
        round_kernels[it->round].emplace_back(p0, p1);
        a.class_kernel_ns[static_cast<std::size_t>(c)] += p1 - p0;
        kernel_total += p1 - p0;
      }
    }
    // Inside a round, outside its calls: the candidate's own work, or another thread's.
    const std::uint64_t in_gaps = covered(lo, hi, rounds) - covered(lo, hi, wide_calls);
    if (in_gaps > 0) {
      if (c == LauncherClass::candidate) a.outside_calls_ns += in_gaps;
      if (act.tid != 0 && e.main_tid != 0 && act.tid != e.main_tid) a.background_ns += in_gaps;
    }
    // While the process had no command.
    const std::uint64_t in_watch = covered(lo, hi, watch);
    if (in_watch > 0) {
      const std::uint64_t lo_w = std::max(lo, e.watch.start_ns), hi_w = std::min(hi, e.watch.end_ns);
      a.between_commands_ns += in_watch - std::min(in_watch, covered(lo_w, hi_w, commands));
    }
  }
  for (std::size_t i = 0; i < a.class_kernel_ns.size(); ++i) {
    a.class_kernel_share[i] = kernel_total == 0 ? 0.0 : static_cast<double>(a.class_kernel_ns[i]) / static_cast<double>(kernel_total);
  }

  // 4. The summary of the timed work (classes, launchers, top table).
  const std::uint64_t first = calls.empty() ? 0 : calls.front().span.first;
  std::uint64_t last = first;
  for (const Call& call : calls) last = std::max(last, call.span.second);
  auto summary = summarize_trace(timed, {std::max<std::uint64_t>(first, 1), std::max<std::uint64_t>(last, 1), {}},
                                 e.summary);
  if (!summary) return summary.status();
  a.timed = std::move(summary).value();

  // 5. The gates.
  a.flags.push_back(gate_finding(
      "call_marks_invalid", !a.marks_valid, true,
      a.marks_valid ? "every timed call's marks lie in order inside its round"
                    : bad_marks + ": the harness's marks around the timed calls are not an honest "
                                  "harness's, reward withheld",
      {{"rounds", static_cast<double>(e.rounds.size())}, {"calls", static_cast<double>(a.calls)}}));
  std::vector<GateFinding> timer;
  // The busy share's basis: only where a round says what to leave out of it (the session).
  bool own_busy_basis = false;
  double busy_kernel_ms = 0, busy_window_ms = 0;
  for (std::size_t r = 0; r < e.rounds.size(); ++r) {
    const TracedRound& round = e.rounds[r];
    const double kernel_ms = ms(busy(round_kernels[r]));
    const double host_ms = ms(round.host.end_ns - std::min(round.host.end_ns, round.host.start_ns));
    a.round_kernel_ms.push_back(kernel_ms);
    a.round_event_ms.push_back(round.event_ms);
    a.round_host_ms.push_back(host_ms);
    a.kernel_ms += kernel_ms;
    a.event_ms += round.event_ms;
    a.host_ms += host_ms;
    own_busy_basis = own_busy_basis || round.warm_up || round.call_cost_ms > 0;
    if (!round.warm_up) {
      busy_kernel_ms += kernel_ms;
      busy_window_ms += std::max(round.event_ms - round.call_cost_ms, 0.0);
    }
    if (!timer.empty()) continue;
    auto checked = check_timer_consistency({round.event_ms, host_ms, kernel_ms}, flag_settings);
    if (!checked) return Status::error("round " + std::to_string(r) + ": " + checked.status().message());
    if (withholds_reward(checked.value())) {
      timer = std::move(checked).value();
      for (auto& flag : timer) flag.reason = "round " + std::to_string(r) + ": " + flag.reason;
    }
  }
  if (timer.empty() && !e.rounds.empty()) {
    TimerFacts facts{a.event_ms, a.host_ms, a.kernel_ms};
    if (own_busy_basis) {
      facts.busy_kernel_ms = busy_kernel_ms;
      facts.busy_window_ms = busy_window_ms;
    }
    auto checked = check_timer_consistency(facts, flag_settings);
    if (!checked) return checked.status();
    timer = std::move(checked).value();
  }
  a.flags.insert(a.flags.end(), timer.begin(), timer.end());

  const bool after = a.after_end_ns > 0;
  a.flags.push_back(gate_finding(
      "work_after_end_mark", after, true,
      after ? "GPU work started in a timed call ran " + three_digits(ms(a.after_end_ns)) +
                  " ms past the call's end mark (the device was not idle when the timer stopped): work "
                  "escaped the timed window, reward withheld"
            : "no work ran past a timed call's end mark",
      {{"after_end_ms", ms(a.after_end_ns)}, {"edge_tolerance_ms", policy.edge_tolerance_ms}}));
  if (e.output_marks) output_mark_flags(e, calls, policy, a);
  const bool outside = a.outside_calls_ns > 0 || a.background_ns > 0;
  a.flags.push_back(gate_finding(
      "work_outside_calls", outside, true,
      outside ? "inside the timed rounds but outside the timed calls: " + three_digits(ms(a.outside_calls_ns)) +
                    " ms of the candidate's own GPU work and " + three_digits(ms(a.background_ns)) +
                    " ms launched from a thread other than the harness's: work escaped the timer, reward withheld"
              : "no candidate or background-thread work between the timed calls",
      {{"candidate_ms", ms(a.outside_calls_ns)}, {"background_thread_ms", ms(a.background_ns)}}));
  const bool between = a.between_commands_ns > 0;
  a.flags.push_back(gate_finding(
      "work_between_commands", between, true,
      between ? three_digits(ms(a.between_commands_ns)) +
                    " ms of GPU work while the candidate's process had no command (the baselines' turn): "
                    "work kept running outside its rounds, reward withheld"
              : "the GPU was idle whenever the candidate's process had no command",
      {{"between_commands_ms", ms(a.between_commands_ns)}}));

  const TraceProcessSummary* own = e.main_tid == 0 ? nullptr : summary_of(trace, e.main_tid);
  const auto share = [&](LauncherClass c) { return a.class_kernel_share[static_cast<std::size_t>(c)]; };
  const double fallback = share(LauncherClass::torch) + share(LauncherClass::triton);
  const bool no_provenance = policy.require_provenance && own != nullptr && !own->provenance;
  const bool fell_back = fallback > policy.max_fallback_share;
  a.flags.push_back(gate_finding(
      "kernel_fallback", fell_back || no_provenance, true,
      no_provenance ? "the trace has no launcher information (provenance off): whose code did the timed work "
                      "cannot be told, reward withheld"
      : fell_back   ? "torch and Triton launched " + percent_text(fallback) + " of the timed kernel time, above " +
                        percent_text(policy.max_fallback_share) +
                        ": the candidate fell back on PyTorch for its compute, reward withheld"
                    : "torch and Triton launched " + percent_text(fallback) + " of the timed kernel time (at most " +
                        percent_text(policy.max_fallback_share) + "); candidate " +
                        percent_text(share(LauncherClass::candidate)) + ", CUDA libraries " +
                        percent_text(share(LauncherClass::cuda_library)),
      {{"candidate_share", share(LauncherClass::candidate)},
       {"cuda_library_share", share(LauncherClass::cuda_library)},
       {"torch_share", share(LauncherClass::torch)},
       {"triton_share", share(LauncherClass::triton)},
       {"other_share", share(LauncherClass::other)},
       {"unknown_share", share(LauncherClass::unknown)},
       {"max_fallback_share", policy.max_fallback_share}}));
  const double unattributed = share(LauncherClass::other) + share(LauncherClass::unknown);
  // Without launcher information every kernel that is not torch's, Triton's or a CUDA library's by
  // name reads as unknown, the candidate's own included: the share says nothing about who launched
  // it, so the review flag is raised only where the trace could have told.
  const bool traced_launchers = own != nullptr && own->provenance;
  const bool vague = traced_launchers && unattributed > policy.max_unattributed_share;
  a.flags.push_back(gate_finding(
      "kernel_unattributed", vague, false,
      vague ? percent_text(unattributed) + " of the timed kernel time was launched from neither the candidate's objects "
                                      "nor a known library (static cudart, ctypes, a copied library?): recorded for review"
      : traced_launchers ? percent_text(unattributed) + " of the timed kernel time from unattributed launchers"
                         : percent_text(unattributed) + " of the timed kernel time not named as torch's, Triton's or a CUDA "
                                                   "library's (kernels classed by name: no launcher information)",
      {{"unattributed_share", unattributed}, {"max_unattributed_share", policy.max_unattributed_share}}));
  return a;
}

void write_kernel_table(JsonWriter& json, const KernelAnalysis& analysis) {
  json.begin_array();
  for (const KernelRow& row : analysis.timed.top) {
    json.begin_object()
        .field("name", row.name)
        .field("kind", trace_kind_name(row.kind))
        .field("class", launcher_class_name(row.launcher_class))
        .field("class_by_name", row.class_by_name)
        .field("launcher", row.launcher)
        .field("calls", static_cast<std::int64_t>(row.calls))
        .field("total_ms", ms(row.total_ns))
        .field("mean_us", row.mean_ns / 1e3)
        .field("share", row.share)
        .end_object();
  }
  json.end_array();
}

void write_kernel_trace(JsonWriter& json, const KernelAnalysis& a, const KernelEvidence& e) {
  json.begin_object().field("status", e.trace == nullptr ? "unreadable: " + e.trace_error : std::string("read"));
  json.field("calls", static_cast<std::int64_t>(a.calls)).field("marks_valid", a.marks_valid);
  json.field("kernel_ms", a.kernel_ms).field("event_ms", a.event_ms).field("host_ms", a.host_ms);
  json.key("rounds").begin_array();
  for (std::size_t r = 0; r < a.round_kernel_ms.size(); ++r) {
    json.begin_object().field("kernel_ms", a.round_kernel_ms[r]).field("event_ms", a.round_event_ms[r]);
    json.field("host_ms", a.round_host_ms[r]).end_object();
  }
  json.end_array();
  json.key("classes").begin_object();
  for (int i = 0; i < kLauncherClasses; ++i) {
    const auto index = static_cast<std::size_t>(i);
    json.key(launcher_class_name(static_cast<LauncherClass>(i)))
        .begin_object()
        .field("kernel_ms", ms(a.class_kernel_ns[index]))
        .field("share", a.class_kernel_share[index])
        .end_object();
  }
  json.end_object();
  json.key("launchers").begin_array();
  for (const LauncherShare& l : a.timed.launchers) {
    json.begin_object().field("path", l.path).field("class", launcher_class_name(l.launcher_class));
    json.field("ms", ms(l.time.sum_ns)).field("count", static_cast<std::int64_t>(l.time.count));
    json.field("share", l.share).end_object();
  }
  json.end_array();
  json.key("escaped_ms").begin_object().field("after_end_mark", ms(a.after_end_ns));
  json.field("outside_calls", ms(a.outside_calls_ns)).field("background_thread", ms(a.background_ns));
  json.field("between_commands", ms(a.between_commands_ns)).field("after_output", ms(a.output.after_output_ns));
  json.field("after_mark_elsewhere", ms(a.output.after_mark_elsewhere_ns)).end_object();
  json.key("output_marks").begin_object().field("checked", e.output_marks);
  json.field("marks", static_cast<std::int64_t>(a.output.marks));
  json.field("unmarked_calls", static_cast<std::int64_t>(a.output.unmarked_calls)).end_object();
  json.key("streams").begin_array();
  for (const StreamTime& s : a.timed.streams) {
    json.begin_object().field("stream", static_cast<std::int64_t>(s.stream)).field("busy_ms", ms(s.time.busy_ns));
    json.field("count", static_cast<std::int64_t>(s.time.count)).end_object();
  }
  json.end_array();
  json.field("threads", static_cast<std::int64_t>(a.timed.threads));
  json.field("main_tid", static_cast<std::int64_t>(e.main_tid));
  json.key("health");
  if (e.trace != nullptr) {
    write_trace_health(json, *e.trace);
  } else {
    json.null();
  }
  json.end_object();
}

}  // namespace cudaagent
