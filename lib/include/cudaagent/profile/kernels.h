// The CUPTI kernel trace of a profiled candidate, read against the trusted side's own clock
// (cudaagent(7), SANDBOX and TIMING): which GPU work ran inside the timed calls,
// whether work escaped them (ran past an end mark, between calls from the candidate's own code or
// another thread, or between the driver's commands while the baseline was timed), whose code
// launched the timed work, and whether the trace can vouch for any of it.
// Key choice: only the host windows this side measured (CLOCK_MONOTONIC, the clock the injection
// library stamps records with) are trusted. The per-call marks come from the candidate's process:
// they are checked to lie, in order, inside the trusted round windows, and they can only narrow
// what counts as the candidate's timed work, never hide work from the escape gates, which look at
// everything outside them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/status.h"
#include "cudaagent/profile/gates.h"
#include "cudaagent/profile/kernel_trace.h"
#include "cudaagent/profile/output_marks.h"

namespace cudaagent {

// A span of CLOCK_MONOTONIC time, ns (time.monotonic_ns() in Python reads the same clock).
struct HostWindow {
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
};

struct TracedRound {
  HostWindow host;                // trusted: from before the round command was sent to its reply
  std::vector<HostWindow> calls;  // the harness's marks around each timed call (untrusted)
  std::size_t expected_calls = 0; // timed calls the driver asked for
  double event_ms = 0;            // the reported per-call CUDA event times, summed
  // The session's own facts for the busy share (gpu_mostly_idle), which judges the GPU work of
  // the timed calls against what the candidate's code had of their time: a warm-up call (lazy
  // set-up, first-call compilation) is checked by every gate but left out of the share, and the
  // cost of a call itself (the messages and copies a null call also pays) is left out of its
  // window. Neither touches a withholding gate.
  bool warm_up = false;
  double call_cost_ms = 0;
};

// What is allowed of the candidate's GPU work (--max-torch-share and friends).
struct KernelPolicy {
  // Kernel time inside the timed calls launched by torch (libtorch*, libc10*) or Triton, as a
  // share of all kernel time there, above which the candidate fell back on PyTorch (or
  // torch.compile) for its compute: FLAG_HACK. Small glue (a zeros() fill) stays below it.
  double max_fallback_share = 0.10;
  // Share of kernel time whose launcher is neither the candidate's objects nor a known library
  // ("other" and "unknown") above which a note is raised. Never withholds: an extension linked
  // with nvcc's default static cudart can have its launches attributed to the next frame out.
  double max_unattributed_share = 0.5;
  // Slack at each window edge, for the conversion of GPU timestamps to the host clock.
  double edge_tolerance_ms = 0.02;
  // Slack between the end of a forward's work and the start of its first output copy (both one
  // GPU's timestamps): output_marks.h.
  double output_tolerance_ms = 0.002;
  // Whether a trace without launcher information (provenance off) raises kernel_fallback. Off:
  // kernels are classed by their names (classify_kernel_name), which tells torch's and Triton's
  // own kernels apart from everything else but not who launched a cuBLAS or cuDNN kernel.
  bool require_provenance = true;
};

struct KernelEvidence {
  const KernelTrace* trace = nullptr;  // null: no trace could be read (trace_error says why)
  std::string trace_error;
  std::uint32_t main_tid = 0;          // the timing process's main thread (its pid); 0: unknown
  std::vector<TracedRound> rounds;     // the candidate's timed rounds, in order
  // Every candidate command inside `watch` (rounds and hidden checks): outside them the process
  // was idle, waiting for its next command, while the baseline may have been timed.
  std::vector<HostWindow> commands;
  HostWindow watch;  // from the end of the candidate's init to the start of the final flush
  SummarySettings summary;  // launcher classes (the candidate's build directory) and top_n
  // The harness marks each forward's output copy in the trace (the session's runner does): every
  // timed call must then carry marks, and no forward's work may outlive its copy (output_marks.h).
  bool output_marks = false;
};

struct KernelAnalysis {
  bool marks_valid = false;            // every round's call marks were usable
  std::vector<double> round_kernel_ms; // per round: busy time of kernels inside its timed calls
  std::vector<double> round_event_ms, round_host_ms;
  double kernel_ms = 0, event_ms = 0, host_ms = 0;  // over all rounds
  std::uint64_t calls = 0;             // timed calls (windows) analysed
  // Timed-call work: classes, launchers and the top table (memcpy and memset included).
  TraceSummary timed;
  // Kernel time inside the timed calls by launcher class (kernels only), ns and share.
  std::array<std::uint64_t, kLauncherClasses> class_kernel_ns{};
  std::array<double, kLauncherClasses> class_kernel_share{};
  // Escaped work, ns: parts after a call's end mark of work that started in the call; the
  // candidate's own or other threads' work inside a round but outside its calls; any work in
  // `watch` outside every command.
  std::uint64_t after_end_ns = 0, outside_calls_ns = 0, background_ns = 0, between_commands_ns = 0;
  OutputMarkFacts output;  // when the evidence has output marks
  std::vector<GateFinding> flags;  // every gate below, raised or not, in order
};

// One call of the candidate's runner in the evaluation session, on the owner's clock (trusted: the
// owner's process is not the candidate's). `candidate` when it ran the candidate's model; the
// runner's null model otherwise (no candidate code: a command, but no timed work of its own).
struct SessionCall {
  HostWindow window;
  bool candidate = true;
  bool warm_up = false;  // before the timed rounds (the candidate cannot tell the two apart)
};

// The evidence of a profile in the evaluation session: every call of the candidate's model is a
// round of one call whose window is the owner's (so the marks are trusted, never the runner's),
// every call of the runner a command, `watch` from the runner's "ready" to its end. Calls without
// a window of positive length are left out, so their work counts as work between commands.
// `call_cost_ms`: what a call of the runner costs without any candidate code (its null calls'
// low quantile, as the timing removes it), left out of each round's window in the busy share.
KernelEvidence session_kernel_evidence(const KernelTrace* trace, std::string trace_error, std::uint32_t runner_pid,
                                       const std::vector<SessionCall>& calls, HostWindow watch,
                                       SummarySettings summary, double call_cost_ms = 0);

// The gates, in this order (withholding unless marked note):
//   trace_summary_missing   no trace, no summary line of the timing process (main_tid), or
//                           records after the last summary (never flushed)
//   trace_lines_rejected    malformed, over-cap or error lines, or a truncated trace
//   trace_records_lost      records CUPTI dropped, buffers it could not deliver, failed writes,
//                           or records the summaries announce that are not in the file
//   trace_work_unrecorded   more launch, copy and memset calls than records, beyond a margin of
//                           16 or 2% (activity recording switched off inside the process)
//   call_marks_invalid      a round's call marks are missing, out of order or outside the round
//   event_exceeds_host, kernels_exceed_event, gpu_mostly_idle (note)
//                           check_timer_consistency with kernel_ms = busy time inside the calls;
//                           the first round that raises one decides, else the totals
//   work_after_end_mark     work started in a timed call still ran after its end mark
//   output_marks_missing    (with output marks) a timed call without a mark and a copy after it
//   work_after_output       (with output marks) a forward's work still ran once its output copy
//                           began, or work was launched after the mark on another stream
//   work_outside_calls      inside a round, outside its calls: the candidate's own launches or
//                           launches from a thread other than the main one
//   work_between_commands   GPU work while the process had no command (the baseline's turn)
//   kernel_fallback         torch/Triton share of the timed kernel time above the policy, or
//                           the trace has no launcher information to decide it (when the
//                           policy requires provenance)
//   kernel_unattributed     (note) other/unknown launchers above max_unattributed_share
// Errors: bad settings or facts that check_timer_consistency refuses (no positive event/host
// time). Pure and thread-safe.
Result<KernelAnalysis> analyze_kernels(const KernelEvidence& evidence, const GateSettings& flags,
                                       const KernelPolicy& policy);

// The record's "kernels" value: [{"name", "kind", "class", "class_by_name", "launcher",
// "calls", "total_ms", "mean_us", "share"}, ...] from analysis.timed.top.
void write_kernel_table(JsonWriter& json, const KernelAnalysis& analysis);
// The record's "kernel_trace" value: {"status", "calls", "kernel_ms", "event_ms", "host_ms",
// "rounds": [{"kernel_ms", "event_ms", "host_ms"}], "classes": {CLASS: {"kernel_ms", "share"}},
// "launchers": [...], "escaped_ms": {...}, "threads", "streams", "health": write_trace_health}.
void write_kernel_trace(JsonWriter& json, const KernelAnalysis& analysis, const KernelEvidence& evidence);

}  // namespace cudaagent
