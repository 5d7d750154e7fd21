// One evaluation session per task, shared by verify and profile: the trusted owner process
// (share/harness/session_owner.py: the pristine task, the inputs, the right answers, the clock and
// the judgement) and runners attached to it (session_runner.py: the candidate in the OS sandbox,
// the baseline models in a clean process). Every call is made, timed and checked the same way, so a
// runner cannot tell a timed call from a checked one, and no verdict rests on what a runner says:
// the owner reads the output buffer it shares with the runner and times the call on its own clock.
//
// The three processes are children of three warm harness workers (sandbox/harness_worker.h), each
// in its own sandbox. The candidate's sandbox can read the built workspace, the task's weights and
// its own socket directory and write nothing but a private, size-capped /tmp and /dev/shm that are
// emptied after every candidate. A session of the same task stays open across candidates (an
// agent's loop); another task ends it.
//
// Not thread-safe: one Evaluator per thread of work.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/evaluation/cpu_groups.h"
#include "cudaagent/sandbox/process.h"
#include "cudaagent/sandbox/runner.h"
#include "cudaagent/sandbox/torch_env.h"

namespace cudaagent {

struct EvaluationSettings {
  std::string device = "cuda";       // "cuda" or "cpu"
  std::string cache_dir;             // where the task sessions' private root is not (see scratch)
  std::string scratch_dir = "/tmp";  // the private root (0700) of sockets, weights and workspaces
  bool keep_dirs = false;            // for debugging the harness
  std::string policy_path;           // allowed ATen operators; empty: share/harness/policy.json
  std::string compile_mode = "default";  // the baseline's torch.compile mode; "none": no compile arm
  double atol = 1e-2;
  double rtol = 1e-2;
  double load_timeout_seconds = 600;  // a runner's start: imports, model build, connection
  std::uint64_t runner_data_bytes = std::uint64_t{16} << 30;  // RLIMIT_DATA of runners (host memory)
  SandboxWrapper sandbox;             // not set: everything runs unsandboxed
  // Runs the candidate's worker as this user (never root: RLIMIT_NPROC does not bind root), with
  // `candidate_processes` as its process limit. Not set: the caller's user, no process limit.
  std::optional<ProcessCredentials> candidate_user;
  std::uint64_t candidate_processes = 256;
  // The share of the candidate's calls run under the operator audit, chosen at random per call by
  // the owner (the runner's first call always). The audit's Python dispatch costs time, so an
  // audited call is checked but left out of the timing.
  double audit_fraction = 1.0;
  // How the owner and its runners wait for a call's messages (share/harness/call_wait.py):
  // "spin" spins up to kCallSpinMs before blocking, "block" blocks at once, "auto" spins on a
  // GPU and blocks on the CPU (where the spinning process would take a core from the working one).
  std::string call_wait = "auto";
  // Runners report when each phase of a call ended and the forward's device time (CUDA events),
  // and each batch says where its calls' time went (CallBatch::phases_ms).
  bool call_diagnostics = false;
  // Forwards per call (1 to 64): each on its own fresh inputs in its own slot of the shared
  // buffers, each judged; a call's host time over them is one sample (CallResult::host_ms), so the
  // fixed cost of a call (messages, the switch between the owner's and the runner's GPU work)
  // weighs 1/N as much. The buffers grow N times: N is cut, per task, so that one runner's N
  // slots of inputs and outputs stay within kSlotMemoryBytes (TaskInfo::forwards). 1 is the
  // default because all N slots' inputs exist from the call's start: a candidate's first forward
  // could compute the later slots side by side (tests/gpu/forward_overlap_check.sh, lookahead).
  int forwards_per_call = 1;
  // When a runner waits for the device within a call of several forwards: "each" after every
  // forward and again after its output is copied out (a candidate's unjoined side stream is waited
  // for; the device idles between forwards, and the two waits' host time is in every sample),
  // "call" once, after the last forward's output is queued (forwards and copies run back to back
  // on the current stream, as a program that uses the module runs them; an output left on a side
  // stream the candidate did not join may be copied unfinished and is then judged wrong). "each"
  // stays the default: with "call" nothing orders two forwards on the candidate's own streams, so
  // a candidate could run a call's forwards side by side (tests/gpu/forward_overlap_check.sh).
  // Even with one forward per call, the output copy and the GPU timer's "done" wait only for the
  // current stream, so input-independent work the candidate queues on a side stream of its own
  // after its output is final (zeroing a buffer for the next call) runs after the window closes:
  // only the kernel trace's output marks catch it (profile's work_after_output gate). "each" waits
  // for the whole device before the copy. Its price: on an H100 that host wait was most of the
  // GPU clock's spread below a millisecond (per-call CV 5-12% against 1-4% with "call"). Verify
  // and profile default to "call" where the trace watches (resolve_forward_sync), with traced
  // baselines and a call lead: without those the traced candidate paid for its own launches where
  // the baselines did not, and its launches after the inputs' copy spread a GEMM candidate's
  // speed-up widely between edits (cudaagent-profile(1)). Here, "each" unless a caller says.
  std::string forward_sync = "each";
  // What times a call (share/harness/stream_flags.py): "host", the owner's host clock from the
  // inputs' copy to the answer (two messages and both processes' wake-ups inside the window), or
  // "gpu", two CUDA events on the owner's stream around the inputs' copy and the runner's work,
  // the streams ordered by flags the GPU writes and waits for, the outputs judged from the owner's
  // private copy taken before the window closed (CUDA only). A forward's own streams must then be
  // ordered after the current stream, or they read the poisoned input slots. "auto" (the default):
  // gpu on the cuda device, host on the CPU (resolve_call_timer).
  std::string call_timer = "auto";
  // With the GPU timer: how long the owner's stream pauses (a sleep kernel) between the runner's
  // "ready" and the window's first event, so that the runner's launches of the forward are queued
  // by the time its inputs are in (the gap otherwise lands in the window with the runner's host's
  // spread). Outside the window; 0: no pause (verify and profile resolve their default with
  // resolve_call_lead_us).
  double call_lead_us = 0;
  // The owner and the two runners each on a group of whole cores of their own (cpu_groups.h), so
  // the scheduler never puts two of them on one core. Off: wherever the scheduler puts them.
  bool cpu_groups = false;
  // A stop request (a signal number, 0 for none; usually the session's): every wait of the
  // evaluator looks at it at least every 0.2 s, ends the owner and its runners, and returns a
  // Status saying so, so SIGTERM stops a verification inside a call, not after it.
  const std::atomic<int>* stop = nullptr;
  // The CUPTI injection library (libcudaagent_cupti.so) the candidate's runner is started with,
  // so that every kernel, copy and memset of its process lands in a trace the trusted side reads
  // (candidate_trace_path()). Empty: not traced. CUDA only.
  std::string kernel_trace_library;
  // Whether the trace records which shared object launched each piece of work (a stack walk per
  // launch, about 6 us each on an H200: it counts against the candidate's time). Off: kernels are
  // told apart by their names.
  bool kernel_trace_provenance = false;
  // The baselines' runner started with the same library, its trace written beside the
  // candidate's and never read: the tracer's cost per launch (CUPTI's callback and record, a few
  // us) then falls on both arms of a speedup, not on the candidate's alone. Profile's default
  // (ProfileSettings::baseline_trace); off here unless a caller says.
  bool trace_baselines = false;
};

// The most memory one runner's slots (N inputs and N outputs of a call) may take on the device.
inline constexpr double kSlotMemoryBytes = 4.0 * (1ull << 30);

// Forwards per call for a task: `requested`, cut so that N slots of one call's inputs and outputs
// fit kSlotMemoryBytes, at least 1. A function of the task's sizes alone, never of a timing, so a
// task's baselines and its candidates' calls always have the same N.
int forwards_for_task(int requested, double input_bytes, double output_bytes);

// How long a waiting side spins before it blocks: longer than the owner's work between two calls
// (inputs, reference, judgement: a few ms), so the runner never sleeps inside a batch, and long
// enough that a call lasting longer loses little to one wake-up.
inline constexpr double kCallSpinMs = 50;

// The spin of a call wait on a device in ms (0: block), or an error for a call_wait that is none
// of "auto", "spin", "block".
Result<double> call_spin_ms(const std::string& call_wait, const std::string& device);
// The call timer a setting names on a device: "auto" is gpu on cuda and host on the CPU (which has
// no CUDA events); host and gpu stay themselves; anything else is an error. Verify and profile
// resolve it before their keys and records, so both name the clock that ran.
Result<std::string> resolve_call_timer(const std::string& call_timer, const std::string& device);

// The forward sync a setting names: "auto" is "call" where the kernel trace's output marks catch
// work left running past the window (CUDA, one forward per call, the candidate traced) and "each"
// everywhere else; each and call stay themselves; anything else is an error. Verify resolves it as
// profile does on its device by default (traced), so a check and a timed call wait alike.
Result<std::string> resolve_forward_sync(const std::string& forward_sync, const std::string& device,
                                         int forwards_per_call, bool traced);

// The call lead that "auto" (kAutoCallLead) stands for: kCallLeadUs with the GPU timer and one
// wait per call, where the runner's launches would otherwise sit inside the window with its
// host's spread; 0 otherwise (with "each" the runner's host wait is in the window anyway). A set
// value stays itself.
inline constexpr double kAutoCallLead = -1;
// On an H100 (December 2026) 600 us took a 0.14 ms GEMM's per-call CV in the agent's loop from
// 20-25% to 0.6-0.8% and a 50 us kernel's from 7-63% to about 2%; a stall the candidate queued
// on a stream of its own ahead of the window was still timed in full (the owner's sleep holds the
// GPU; two processes' work does not run side by side), tests/gpu/window_escape_check.sh.
inline constexpr double kCallLeadUs = 600;
double resolve_call_lead_us(double call_lead_us, const std::string& call_timer, const std::string& forward_sync);

// The three above in their order (the sync depends on nothing resolved, the lead on the timer and
// the sync), in place: what runs is what verify's and profile's keys and records then name.
Status resolve_call_timing(const std::string& device, int forwards_per_call, bool traced, std::string& call_timer,
                           std::string& forward_sync, double& call_lead_us);

// What the owner learned from the task: the layout of a call's inputs and outputs.
struct TaskInfo {
  std::string task_hash;          // SHA-256 of model.py
  std::string layout_json;        // the owner's "init" reply (inputs, outputs, device, phases)
  double input_bytes = 0;
  double output_bytes = 0;
  int forwards = 1;               // forwards per call for this task (forwards_for_task)
  double seconds = 0;             // to open: the owner's start and model build
};

// The owner's judgement of one call's output (compare.py); the record's check fields.
struct CallCheck {
  bool match = false;
  std::string failure;  // "none", "format", "values", "degenerate", "inputs_modified"
  std::string reason;
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::int64_t mismatched = 0;
  std::string worst;
};

struct CallResult {
  std::uint64_t seed = 0;
  double host_ms = 0;               // the owner's clock, from the inputs' copy to the answer
  std::optional<double> gpu_ms;     // call_timer "gpu": the owner's CUDA events' window
  // The call's time per forward as the session's timer measured it.
  double sample_ms() const { return gpu_ms ? *gpu_ms : host_ms; }
  std::optional<CallCheck> check;   // absent when the runner answered with an error
  std::string runner_json;          // what the runner said beside its answer (untrusted, for people)
  bool audited = false;             // ran under the operator audit: checked, but not a timing sample
  // The call's window on the owner's CLOCK_MONOTONIC, ns: from the inputs' copy to the answer (0
  // when the owner did not say). The kernel trace is read against it.
  std::uint64_t start_ns = 0, end_ns = 0;
};

// Why a batch of calls ended early.
struct CallStop {
  std::size_t call = 0;
  std::string why;     // "timeout", "runner ended", "runner error"
  std::string detail;  // the runner's error text (untrusted, for people)
};

struct CallBatch {
  std::vector<CallResult> calls;
  std::optional<CallStop> stopped;
  // The owner's own time around the calls (inputs, reference, prepare, judge), summed, in ms.
  std::map<std::string, double> owner_ms;
  // With call_diagnostics: the median of each phase of the timed calls in ms (session_owner.py's
  // call_phases). From a candidate's runner, partly its own account: for people, never a sample.
  std::map<std::string, double> phases_ms;
};

// How an attached runner came up (its own account: untrusted, evidence only).
struct RunnerStart {
  bool ok = false;
  std::string problem;                   // when !ok: why, for people
  std::optional<ProcessResult> ended;    // when the runner ended before it was ready
  std::string ready_json;                // its "ready" message
  std::vector<std::string> sandbox_layers;
  double seconds = 0;
  std::uint32_t pid = 0;                 // the process id it gave in "ready" (0: none)
};

// How a runner ended: its process (merged output in `err`, strays its worker ended) and what it
// reported on its way out (the audit's findings: untrusted, can only lower a verdict).
struct RunnerEnd {
  ProcessResult process;
  std::map<std::string, std::int64_t> forbidden_ops;
  // Audited calls after which the audit's own probe went unseen: the audit had been switched off
  // inside the process (a dispatch key excluded, the mode popped).
  std::int64_t audit_off = 0;
  bool reported = false;  // the runner answered "exit" with its report
};

class Evaluator {
 public:
  // Prepares the private root; workers start on first use (or launch_workers). A Status when the
  // root cannot be made.
  static Result<std::unique_ptr<Evaluator>> create(EvaluationSettings settings, TorchEnv torch);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Starts the three workers without waiting, so their interpreter starts overlap a build.
  void launch_workers();

  // The owner session of `model_py`: the open one when it is the same task, else a new one (any
  // attached runner is ended). A Status when the owner cannot start or the task cannot be loaded
  // (its reason: the task is broken, an INFRA_ERROR for a verdict).
  Result<TaskInfo> open_task(const std::string& model_py);

  // Starts the candidate's runner on a built workspace (model_new.py and the extension) and
  // attaches it. A runner that fails to come up is a RunnerStart with ok = false (the candidate's
  // failure); a Status when the machinery failed.
  Result<RunnerStart> attach_candidate(const std::string& work_dir);
  // The baseline runner (eager, compile, null); started once per task.
  Result<RunnerStart> attach_baseline();
  bool baseline_attached() const;

  // One call per seed on `arm` ("candidate" or "baseline") with `model` ("candidate", "eager",
  // "compile", "null"). A Status when the owner failed.
  Result<CallBatch> calls(const std::string& arm, const std::string& model,
                          const std::vector<std::uint64_t>& seeds, double call_timeout_seconds,
                          bool flush = true);

  // Ends the candidate's runner: asks it to stop, then kills it if it does not. Its worker ends any
  // process it left behind and empties its /tmp and /dev/shm.
  Result<RunnerEnd> end_candidate();

  // Where the session's processes run (EvaluationSettings::cpu_groups), decided once.
  const CpuPlacement& placement() const;

  // Fresh seeds from the OS's random source: the trusted side's secret until each call.
  std::vector<std::uint64_t> fresh_seeds(std::size_t count);

  // The candidate runner's kernel trace (EvaluationSettings::kernel_trace_library), emptied by
  // every attach_candidate(): whole once end_candidate() returned. Empty when not traced. The
  // file is written by the candidate's process: hostile input (kernel_trace.h reads it so).
  const std::string& candidate_trace_path() const;
  // Where a candidate's built workspace must be for its runner to see it: a directory below it.
  const std::string& candidate_root() const;
  // Whether the last open_task() found its task already open (an agent's loop over one task).
  bool task_reused() const;

  const TorchEnv& torch() const;
  const EvaluationSettings& settings() const;
  // SHA-256 over the session scripts and the policy: what a stored result's key must include.
  const std::string& harness_hash() const;

 private:
  struct State;
  explicit Evaluator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace cudaagent
