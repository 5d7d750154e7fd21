// Kernel traces: reading the JSON Lines that libcudaagent_cupti.so (lib/cuda/cupti_inject/) writes
// inside the candidate's process, and summarising the GPU work of a time window — busy time,
// which library's kernels took the time (the candidate's own, cuBLAS/cuDNN, torch, Triton),
// the top kernels, and work that escaped the window or ran on other streams (cudaagent(7), TIMING;
// attack cases in tests/gpu/). Key choice: the trace is hostile
// input (the candidate can write to it), so every line is checked and capped, a bad line is
// rejected with its reason and counted, and nothing in a trace can make the reader fail or grow
// without bound; what the summary cannot vouch for (rejected lines, a missing summary line,
// dropped records) is reported for the caller to flag, never hidden.
//
// Line format (one JSON object per line; times are CLOCK_MONOTONIC ns, comparable with Python's
// time.monotonic_ns()):
//   {"kind":"kernel","name":MANGLED,"demangled":TEXT,"device":N,"context":N,"stream":N,
//    "correlation":N,"start_ns":N,"end_ns":N,"grid":[x,y,z],"block":[x,y,z],"shared_bytes":N,
//    "registers":N,"graph":N,"launcher":PATH|null,"tid":N|null}
//   {"kind":"memcpy","copy":"HtoD"|"DtoH"|"DtoD"|...,"bytes":N, device..end_ns as above,
//    "graph":N,"launcher":PATH|null,"tid":N|null}
//   {"kind":"memset","bytes":N, device..end_ns, "graph":N,"launcher":PATH|null,"tid":N|null}
//   {"kind":"summary","pid":N,"flush":N,"records":{"kernel":N,"memcpy":N,"memset":N,"other":N},
//    "dropped":N,"buffer_errors":N,"write_failures":N,"launches":N,"unknown_launchers":N,
//    "unresolved_walks":N,"provenance":BOOL,"clock":"monotonic"|"monotonic_offset",
//    "cupti_version":N,"cupti_header_version":N,"callbacks":N,"cupti_library":PATH}
//   {"kind":"error","pid":N,"message":TEXT}
//   {"kind":"mark","pid":N,"correlation":N,"stream":N,"at_ns":N}   the harness is about to copy
//    a forward's output out on `stream`; every launch before it has a correlation id <= N
// "launcher" is the resolved path of the shared object whose code made the launch call (the first
// stack frame outside libcuda, libcudart, libcupti and the injection library); "tid" the
// launching thread. Summary counters are cumulative per process; each flush appends one.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/status.h"

namespace cudaagent {

enum class TraceKind { kernel, memcpy, memset };
std::string_view trace_kind_name(TraceKind kind);  // "kernel", "memcpy", "memset"

inline constexpr std::uint32_t kNoLauncher = 0xFFFFFFFFu;

// One unit of GPU work. Strings are interned in the KernelTrace.
struct TraceActivity {
  TraceKind kind = TraceKind::kernel;
  std::uint32_t name = 0;               // index into KernelTrace::names
  std::uint32_t launcher = kNoLauncher;  // index into KernelTrace::launchers, or kNoLauncher
  std::uint32_t device = 0, context = 0, stream = 0, correlation = 0;
  std::uint64_t start_ns = 0, end_ns = 0;  // start_ns > 0, end_ns >= start_ns
  std::uint64_t bytes = 0;                 // memcpy, memset
  std::array<std::int64_t, 3> grid{}, block{};  // kernel
  std::uint32_t tid = 0;                   // launching thread; 0: unknown
  std::uint64_t line = 0;                  // 1-based line in the trace
};

// The last summary line of one process.
struct TraceProcessSummary {
  std::uint64_t pid = 0;
  std::uint64_t flush = 0;
  std::uint64_t kernels = 0, memcpys = 0, memsets = 0, other_records = 0;
  std::uint64_t dropped = 0, buffer_errors = 0, write_failures = 0;
  std::uint64_t launches = 0, unknown_launchers = 0, unresolved_walks = 0;
  bool provenance = false;
  std::string clock;
};

// A "mark" line: the harness is about to copy a forward's output (cudaagent_cupti_mark).
struct TraceMark {
  std::uint64_t pid = 0;
  std::uint32_t correlation = 0;  // the highest correlation id launched before the mark
  std::uint32_t stream = 0;       // the stream the copies are queued on
  std::uint64_t at_ns = 0;        // CLOCK_MONOTONIC, when the mark was made
  std::uint64_t line = 0;
};

struct TraceProblem {
  std::uint64_t line = 0;
  std::string reason;
};

struct KernelTrace {
  std::vector<TraceActivity> activities;  // in file order
  // names[i]: a kernel's mangled name, or "[memcpy HtoD]"-style labels; demangled[i] its
  // demangled form ("" when the line gave none).
  std::vector<std::string> names, demangled;
  std::vector<std::string> launchers;
  std::vector<TraceProcessSummary> summaries;  // one per process id, in order of first appearance
  std::vector<TraceMark> marks;                // in file order
  std::vector<std::string> errors;             // messages of "error" lines (the first few)
  std::uint64_t error_lines = 0;
  std::uint64_t lines = 0;                     // lines seen (non-empty)
  std::uint64_t rejected = 0;                  // malformed or over-cap lines
  std::vector<TraceProblem> problems;          // the first few rejected lines, with reasons
  // Activity lines after the last summary line: records that were written but never covered by
  // a flush (the process died or kept running); 0 for a trace that ends with its summary.
  std::uint64_t after_last_summary = 0;
  bool truncated = false;  // the input was larger than the byte cap: only its beginning was read
};

struct TraceLimits {
  std::uint64_t max_bytes = std::uint64_t{1} << 30;  // bytes read from a trace; the rest is ignored
  std::size_t max_line_bytes = 1 << 16;
  std::size_t max_name_bytes = 1 << 14;               // kernel names, launcher paths, messages
  std::size_t max_activities = std::size_t{1} << 23;  // ~8.4 M records (about 1 GiB in memory)
  std::size_t max_names = 1 << 16;                    // distinct kernel names
  std::size_t max_launchers = 1 << 12;                // distinct launcher paths
  std::size_t max_processes = 1 << 10;                // distinct pids in summary lines
  std::size_t max_marks = std::size_t{1} << 20;       // mark lines (one per forward)
  std::size_t kept_problems = 20;                     // rejected lines kept with their reason
  std::size_t kept_errors = 20;                       // error-line messages kept
};

// Parses trace text. Never fails: every line becomes an activity, a summary, an error message or
// a rejected line with its reason. Lines beyond max_bytes are not read (truncated = true).
KernelTrace parse_kernel_trace(std::string_view text, const TraceLimits& limits = {});

// Reads and parses the trace file at `path` as hostile input: never through a symlink, only a
// regular file (a FIFO would block us), at most limits.max_bytes of it. Errors: the file cannot
// be opened or read, or is not a regular file.
Result<KernelTrace> read_kernel_trace(const std::string& path, const TraceLimits& limits = {});

// Who launched a piece of GPU work.
enum class LauncherClass {
  candidate,     // an object under one of ClassifySettings::candidate_paths
  cuda_library,  // cuBLAS, cuBLASLt, cuDNN (and the CUTLASS kernels inside them), cuFFT, NCCL, ...
  torch,         // libtorch*, libc10*
  triton,        // Triton's launcher stubs (torch.compile's kernels)
  other,         // any other object (Python's ctypes, CuPy, a library outside the trusted paths)
  unknown,       // no launcher recorded, and the kernel name says nothing either
};
inline constexpr int kLauncherClasses = 6;
std::string_view launcher_class_name(LauncherClass c);  // "candidate", "cuda_library", ...

struct ClassifySettings {
  // Directories or files holding the candidate's own objects (its workspace, its build
  // directory). A launcher under one of them is the candidate's whatever its name.
  std::vector<std::string> candidate_paths;
  // When non-empty, cuda_library, torch and triton are granted only to launchers under one of
  // these directories (the torch install, the NVIDIA wheels, the CUDA toolkit); a look-alike
  // elsewhere (a candidate's own libcublasLt.so copy in /tmp) is `other`.
  std::vector<std::string> trusted_library_paths;
};

// The class of a launcher path (empty: unknown). Pure, thread-safe.
LauncherClass classify_launcher(std::string_view path, const ClassifySettings& settings);
// The fallback when no launcher was recorded: cuda_library for cuBLAS/cuDNN/CUTLASS/nvjet/xmma
// names, torch for names that hold at::native or at::cuda or are c10's own, triton for triton_
// names, else unknown. Names
// are the candidate's to choose, so this never yields `candidate` and is reported as a guess.
LauncherClass classify_kernel_name(std::string_view mangled, std::string_view demangled);

// Busy time of a set of activities (parts inside the span considered).
struct GpuTime {
  std::uint64_t busy_ns = 0;  // length of the union of their intervals (concurrent work once)
  std::uint64_t sum_ns = 0;   // sum of their durations
  std::uint64_t count = 0;
};

struct StreamTime {
  std::uint32_t stream = 0;
  GpuTime time;
};

struct ClassShare {
  LauncherClass launcher_class = LauncherClass::unknown;
  GpuTime time;
  double share = 0;              // time.sum_ns / all.sum_ns (0 when the window had no work)
  std::uint64_t by_name = 0;     // activities classed by kernel name (no launcher recorded)
};

struct LauncherShare {
  std::string path;  // "" for activities without a launcher
  LauncherClass launcher_class = LauncherClass::unknown;
  GpuTime time;
  double share = 0;
};

struct KernelRow {
  TraceKind kind = TraceKind::kernel;
  std::string name;       // demangled when known, else as recorded
  std::string launcher;   // "" when unknown
  LauncherClass launcher_class = LauncherClass::unknown;
  bool class_by_name = false;
  std::uint64_t calls = 0;
  std::uint64_t total_ns = 0;  // inside the window
  double mean_ns = 0;
  double share = 0;            // of all.sum_ns
};

struct TraceWindow {
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  // The timed stream (the id cudaagent_cupti_stream_id gives); off_stream is computed when set.
  std::optional<std::uint32_t> stream;
};

struct TraceSummary {
  std::uint64_t window_ns = 0;
  GpuTime all;      // every activity, clipped to the window
  GpuTime kernels;  // kernels only, clipped to the window
  std::vector<StreamTime> streams;  // per stream (clipped), by stream id
  std::array<ClassShare, kLauncherClasses> classes;  // in LauncherClass order
  std::vector<LauncherShare> launchers;  // by time, largest first
  std::vector<KernelRow> top;            // by total time, largest first, at most top_n
  // The parts of activities that overlap the window's edges or lie outside it, before its start
  // and after its end (count: activities with any part there).
  GpuTime before, after;
  std::optional<GpuTime> off_stream;  // inside the window, on streams other than window.stream
  std::uint64_t unknown_launchers = 0;  // activities in the window without a launcher
  std::uint32_t devices = 0, contexts = 0, threads = 0;  // distinct ones in the window
};

struct SummarySettings {
  ClassifySettings classify;
  std::size_t top_n = 10;
};

// The window's summary. Errors: end_ns < start_ns. Thread-safe (reads only).
Result<TraceSummary> summarize_trace(const KernelTrace& trace, const TraceWindow& window,
                                     const SummarySettings& settings);

// The union of totals over the trace's processes: dropped, buffer_errors and write_failures
// summed from each process's last summary line.
struct TraceLosses {
  std::uint64_t dropped = 0, buffer_errors = 0, write_failures = 0;
  // Records the summary lines announce that are in the trace neither as activities nor as
  // rejected lines: lines lost or removed (never negative; exact for a one-process trace).
  std::uint64_t missing = 0;
  // Launch, copy and memset API calls the callbacks saw, and the records CUPTI delivered. Fewer
  // records than calls means work went unrecorded (activity tracing switched off or its buffers
  // taken over inside the process) or calls that queued no work (a launch that failed, an empty
  // copy); graph launches make records outnumber calls. A signal for review, not proof.
  std::uint64_t launches = 0, records = 0;
};
TraceLosses trace_losses(const KernelTrace& trace);

// {"window_ns", "busy_ns", "sum_ns", "activities", "kernel_busy_ns", "streams": [{"stream",
//  "busy_ns", "sum_ns", "count"}], "classes": {CLASS: {"sum_ns", "busy_ns", "count", "share",
//  "by_name"}}, "launchers": [{"path", "class", "sum_ns", "count", "share"}], "top": [{"kind",
//  "name", "launcher", "class", "class_by_name", "calls", "total_ns", "mean_ns", "share"}],
//  "before": {...}, "after": {...}, "off_stream": {...}|null, "unknown_launchers", "devices",
//  "contexts", "threads"} — GpuTime objects as {"busy_ns", "sum_ns", "count"}.
void write_trace_summary(JsonWriter& json, const TraceSummary& summary);
// {"lines", "rejected", "problems": [{"line", "reason"}], "processes", "errors": [...],
//  "error_lines", "after_last_summary", "truncated", "dropped", "buffer_errors",
//  "write_failures", "missing", "launches", "records"} — what the caller needs to decide whether
//  the trace is whole.
void write_trace_health(JsonWriter& json, const KernelTrace& trace);

}  // namespace cudaagent
