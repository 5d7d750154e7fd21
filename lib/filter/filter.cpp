// One task through the filter: one job, in a fresh forked child of a warm harness worker
// (share/harness/worker.py) that has imported torch once, runs the checks and says "checked"; the
// trusted side reads its files; a task still kept takes the device's timing slot and the job is
// told "go" (eager, then the compiled model, timed in the same process). Key design choice: the
// model is built, the inputs drawn and the graph compiled once, before the slot is taken, so
// neither that work nor the wait for the slot holds the device or eats into the job's time limit.
#include "cudaagent/filter/filter.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/base/version.h"
#include "cudaagent/device/device_lock.h"
#include "cudaagent/device/gpu_query.h"
#include "cudaagent/filter/device_share.h"
#include "cudaagent/sandbox/harness_worker.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr std::size_t kReportLimit = std::size_t{1} << 20;
// How long a timing job waits for another process's hold on its device before it fails.
constexpr double kLockPatienceSeconds = 6 * 3600;

double since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

struct HarnessRun {
  ProcessResult process;
  std::optional<HarnessReport> report;
  std::string report_problem;
};

// How the task's job went: the run as it ended, and whether it got as far as "checked" (its check
// files then exist and were judged).
struct TaskJob {
  HarnessRun run;
  bool checked = false;
};

// Where a task's seconds went: its checks (to "checked", or the job's end), then the wait for the
// device's slot, the slot itself, and everything after the checks but the wait.
struct JobSeconds {
  double check = 0, slot_wait = 0, slot = 0, after_check = 0;
  double grow_wait = 0;  // waiting to take the task's whole estimate back after torch.compile
};

// A number as text that reads back as the same double (flags for the job, the store's key).
std::string exact_text(double number) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", number);
  return text;
}


}  // namespace

// One warm worker and the two directories its sandbox binds: in/ (read-only to it: each job's
// model.py) and out/ (writable: each job's output directories, and HOME for torch.compile's
// caches). A worker serves one task at a time; it is bound to one device.
struct FilterWorker {
  std::size_t device = 0;
  std::string in, out;
  std::unique_ptr<HarnessWorker> worker;
  bool busy = false;
  DeviceShare::Seat seat;  // its task's, while busy
};

struct TaskFilter::State {
  FilterSettings settings;
  TorchEnv torch;
  std::string harness;
  std::string lock_dir;  // empty: no cross-process timing lock
  std::vector<std::string> devices;  // "cpu", or the CUDA device ids
  std::vector<std::string> lock_names;  // per device: the one device lock name (device_lock.h)
  std::string root;      // private (0700, or 0711 with run_as): the workers' directories and logs
  std::unique_ptr<RemovedTree> remove_root;

  // Which device each task runs on (and whether alone), the workers (under `mutex`), and each
  // device's timing slot in this process.
  std::unique_ptr<DeviceShare> share;
  std::mutex mutex;
  std::vector<std::unique_ptr<FilterWorker>> workers;
  std::vector<std::unique_ptr<std::mutex>> timing;

  ~State() {
    workers.clear();  // workers first: their sandboxes hold binds below the root
    remove_root.reset();
  }

  // The least busy device and an idle worker for it (a new one, not yet started, when none is
  // idle: at most as many workers as tasks run at once). `alone`: once no other task of this
  // process runs there (new ones wait meanwhile). A Status when its directories cannot be made,
  // or a stop request ended the wait.
  Result<FilterWorker*> acquire_worker(bool alone, TaskMemory memory);
  void release_worker(FilterWorker* worker) {
    const DeviceShare::Seat seat = worker->seat;
    {
      std::lock_guard lock(mutex);
      worker->busy = false;
    }
    share->leave(seat);
  }


  HarnessJob make_job(const std::string& task_dir, const std::string& out_dir) const;
  // The task's one job, interactive: it runs the checks and says "checked"; `judge` then reads
  // their outputs and says whether the task is still kept. Only then is the device's timing slot
  // taken and the job told "go" (eager and torch.compile timed in the same process: the model
  // built, the inputs drawn and the graph compiled once); a rejected task's job is told to stop.
  Result<TaskJob> run_task_job(FilterWorker& worker, const std::string& task_dir,
                               const std::string& out_dir,
                               const std::function<bool(const HarnessReport&)>& judge,
                               JobSeconds& seconds);
  FilterOutcome filter(const std::string& model_py, TaskMemory memory);
  // One run of the task; `retried_because`: why an earlier run beside other tasks failed (this
  // run then has the device to itself). `shared_failure` receives that reason when this run
  // failed for a shared resource while other tasks ran on its device.
  FilterOutcome filter_once(const std::string& model_py, TaskMemory memory,
                            const std::string& retried_because,
                            std::string& shared_failure);
};

namespace {

// Makes an output directory the harness user can write.
bool make_out_dir(const std::string& path, const std::optional<ProcessCredentials>& run_as) {
  if (::mkdir(path.c_str(), 0700) != 0) return false;
  return !run_as || ::chown(path.c_str(), run_as->uid, run_as->gid) == 0;
}

std::string reasons_json(const std::vector<FilterReason>& reasons) {
  std::string json;
  JsonWriter out(json);
  out.begin_array();
  for (const auto& reason : reasons) {
    out.begin_object().field("check", reason.check).field("detail", reason.detail).end_object();
  }
  out.end_array();
  return json;
}

}  // namespace

Result<FilterWorker*> TaskFilter::State::acquire_worker(bool alone, TaskMemory memory) {
  auto seat = share->take(alone, memory.peak, settings.stop, memory.resident);
  if (!seat) return seat.status();
  const std::size_t device = seat.value().device;
  std::lock_guard lock(mutex);
  // The seat goes back if no worker can be had for it.
  struct SeatGuard {
    DeviceShare& share;
    std::optional<DeviceShare::Seat> seat;
    ~SeatGuard() {
      if (seat) share.leave(*seat);
    }
  } guard{*share, seat.value()};
  FilterWorker* chosen = nullptr;
  for (const auto& worker : workers) {
    if (!worker->busy && worker->device == device) {
      chosen = worker.get();
      break;
    }
  }
  if (chosen == nullptr) {
    auto made = std::make_unique<FilterWorker>();
    const std::string dir = root + "/worker-" + std::to_string(workers.size());
    made->device = device;
    made->in = dir + "/in";
    made->out = dir + "/out";
    const unsigned traversable = settings.run_as ? 0711 : 0700;
    const auto make_dir = [&](const std::string& path) {  // chmod: the umask may have cut it
      return ::mkdir(path.c_str(), traversable) == 0 && ::chmod(path.c_str(), traversable) == 0;
    };
    if (!make_dir(dir) || !make_dir(made->in) || !make_out_dir(made->out, settings.run_as)) {
      return Status::error("cannot create the worker directories in " + cudaagent::quoted(dir));
    }
    HarnessWorkerPlan plan;
    plan.python = torch.python;
    plan.harness_dir = harness;
    plan.log_path = dir + "/worker.log";
    plan.env = harness_environment(made->out);  // HOME: the worker's output directory
    // One thread of torch.compile per job: Inductor's default is a pool of one Python process
    // per core in every job, which --jobs parallel check jobs would multiply past the cores (each
    // pool process importing torch). Parallelism comes from --jobs.
    plan.env.emplace_back("TORCHINDUCTOR_COMPILE_THREADS=1");
    // torch.compile's Python stack (Dynamo, Inductor, Triton: seconds of imports) once per worker,
    // not once per task: every job is a fresh fork of the worker.
    if (settings.compile) plan.warm_modules = {"torch._dynamo", "torch._inductor.compile_fx"};
    if (settings.device == "cuda") plan.env.push_back("CUDA_VISIBLE_DEVICES=" + devices[device]);
    plan.run_as = settings.run_as;
    plan.readable = {harness, made->in};
    plan.writable = {made->out};
    plan.wrap = settings.sandbox;
    plan.stop = settings.stop;
    made->worker = make_harness_worker(plan);
    workers.push_back(std::move(made));
    chosen = workers.back().get();
  }
  chosen->busy = true;
  chosen->seat = *guard.seat;
  guard.seat.reset();
  return chosen;
}

HarnessJob TaskFilter::State::make_job(const std::string& task_dir, const std::string& out_dir) const {
  HarnessJob job;
  job.script = harness + "/filter_task.py";
  job.args = {"--await-go", "--task", task_dir + "/model.py", "--out", out_dir, "--device",
              settings.device, "--seed", std::to_string(settings.seed), "--runs",
              std::to_string(settings.timing_runs), "--slow-ms",
              std::to_string(settings.window_high_ms * 3), "--atol", exact_text(settings.tolerance.atol),
              "--rtol", exact_text(settings.tolerance.rtol)};
  if (settings.compile) {
    job.args.emplace_back("--compile");
    job.args.emplace_back("--memory-turns");  // "compiling" / "compiled" (see run_task_job)
  }
  job.working_dir = out_dir;
  job.timeout_seconds = settings.timeout_seconds;
  job.output_cap = std::size_t{256} << 10;
  job.limits.file_size_bytes = std::uint64_t{8} << 30;
  if (settings.memory_limit_bytes > 0) {
    // Private writable memory on every device (RLIMIT_DATA leaves alone the address space the CUDA
    // driver reserves, about twice the GPU's); the whole address space too where there is no CUDA.
    job.limits.data_bytes = settings.memory_limit_bytes;
    if (settings.device == "cpu") job.limits.address_space_bytes = settings.memory_limit_bytes;
  }
  return job;
}

namespace {

HarnessRun read_report(ProcessResult process, const std::string& out_dir) {
  HarnessRun run{std::move(process), std::nullopt, {}};
  std::string text;
  if (auto read = read_untrusted_file(out_dir + "/report.json", kReportLimit, text); !read) {
    run.report_problem = read.message();
  } else if (auto parsed = parse_harness_report(text); !parsed) {
    run.report_problem = parsed.status().message();
  } else {
    run.report = std::move(parsed).value();
  }
  return run;
}

}  // namespace

Result<TaskJob> TaskFilter::State::run_task_job(FilterWorker& worker, const std::string& task_dir,
                                               const std::string& out_dir,
                                               const std::function<bool(const HarnessReport&)>& judge,
                                               JobSeconds& seconds) {
  auto opened = worker.worker->open_session(make_job(task_dir, out_dir));
  if (!opened) return opened.status();
  HarnessSession session = std::move(opened).value();
  // The time limit holds for the checks and, again, for the timing; never for the slot's wait.
  const double limit = settings.timeout_seconds;
  const auto timed_out = [&] {
    session.abort();  // kills the worker, and the job with it
    ProcessResult result;
    result.outcome = ProcessResult::Outcome::kTimedOut;
    result.signal = SIGKILL;
    result.timeout_seconds = limit;
    return result;
  };
  const auto ended = [&](ProcessResult result, bool checked) -> Result<TaskJob> {
    return TaskJob{read_report(std::move(result), out_dir), checked};
  };
  // While the job's torch.compile works on the CPU (from its line "compiling" to "compiled") the
  // seat holds only the task's resident bytes; before the job may run the compiled graph, the
  // seat takes the rest back, waiting until it fits (not counted against the limit), and the job
  // is told "go". Once per job: later lines of the kind change nothing.
  const auto memory_line = [&](std::string_view text) -> Status {
    if (text == "compiling") share->shrink(worker.seat);
    if (text != "compiled") return Status::ok();
    const auto waiting = SteadyClock::now();
    Status grown = share->grow(worker.seat, settings.stop);
    seconds.grow_wait += since(waiting);
    if (!grown) return grown;
    (void)session.send("go");  // a worker that is gone: its end is the next message
    return Status::ok();
  };
  // Waits, within the limit counted from `start`, for the job's line `expected`: nullopt when it
  // came, else how the job ended (on its own, or killed at the limit). Memory lines are answered,
  // other lines dropped.
  using Awaited = std::optional<ProcessResult>;
  const auto await_line = [&](std::string_view expected,
                              SteadyClock::time_point start) -> Result<Awaited> {
    const double grow_wait_before = seconds.grow_wait;
    for (;;) {
      const double remaining = limit - (since(start) - (seconds.grow_wait - grow_wait_before));
      if (remaining <= 0) return Awaited(timed_out());
      auto message = session.receive(remaining);
      if (!message) return message.status();
      if (message.value().kind == HarnessSession::Message::Kind::kEnded) {
        return Awaited(std::move(message.value().result));
      }
      if (message.value().kind != HarnessSession::Message::Kind::kLine) continue;
      if (message.value().text == expected) return Awaited();
      if (Status answered = memory_line(message.value().text); !answered) return answered;
    }
  };
  // 1. The checks: until "checked", or the job's end (a task that fails, crashes or hangs).
  auto phase = SteadyClock::now();
  auto checked = await_line("checked", phase);
  seconds.check = since(phase);
  if (!checked) return checked.status();
  if (checked.value()) return ended(std::move(*checked.value()), false);
  // A job whose compile never said "compiled" (it failed) is timed with its whole estimate held.
  const auto regrowing = SteadyClock::now();
  if (Status grown = share->grow(worker.seat, settings.stop); !grown) return grown;
  seconds.grow_wait += since(regrowing);
  const auto after_check = SteadyClock::now();
  // 2. The report's findings are validated and judged here; a task rejected there is not timed.
  std::string text;
  std::optional<HarnessReport> report;
  if (read_untrusted_file(out_dir + "/report.json", kReportLimit, text)) {
    if (auto parsed = parse_harness_report(text)) report = std::move(parsed).value();
  }
  const bool readable = report && report->phase == "checked";
  if (!readable || !judge(*report)) {
    auto closed = session.close(limit);  // stdin closed: the job ends without timing anything
    if (!closed) return closed.status();
    seconds.after_check = since(after_check);
    // An unreadable report is judged as the job ended, like any other.
    return ended(std::move(closed).value(), readable);
  }
  // 3. Warm-up and timing, alone on the device.
  const auto waiting = SteadyClock::now();
  std::unique_lock slot(*timing[worker.device]);
  if (settings.stop != nullptr && settings.stop->load() != 0) return stopped_status(settings.stop->load());
  // The machine-wide slot: the same lock profile takes, so a filter timing job and a profile on
  // one GPU never overlap. Waiting for it does not count against the job's time limit.
  std::optional<DeviceLock> machine_slot;
  if (!lock_dir.empty()) {
    auto lock = DeviceLock::acquire(lock_dir, lock_names[worker.device], kLockPatienceSeconds, {},
                                    settings.stop);
    if (!lock) return lock.status();
    machine_slot.emplace(std::move(lock).value());
  }
  seconds.slot_wait = since(waiting);
  phase = SteadyClock::now();
  if (Status sent = session.send("go"); !sent) {
    // The worker is gone (the session aborted it): the job ended with it.
    ProcessResult result;
    result.outcome = ProcessResult::Outcome::kSignaled;
    result.signal = SIGKILL;
    result.err = "the harness worker died during the job: " + sent.message();
    seconds.slot = since(phase);
    seconds.after_check = since(after_check) - seconds.slot_wait;
    return ended(std::move(result), true);
  }
  // The slot is held until the job says "timed" (its timed calls are over) or ends: what it does
  // after its last timed call (freeing gigabytes of device memory, ending its CUDA context) needs
  // the device to itself no more than its checks did.
  auto timed = await_line("timed", phase);
  if (!timed) return timed.status();
  Awaited result = std::move(timed).value();
  seconds.slot = since(phase);
  machine_slot.reset();
  slot.unlock();
  if (!result) {
    auto closed = session.close(limit);  // its end, with a time limit of its own
    if (!closed) return closed.status();
    result = std::move(closed).value();
  }
  if (result->outcome == ProcessResult::Outcome::kTimedOut) result->timeout_seconds = limit;
  seconds.after_check = since(after_check) - seconds.slot_wait;
  return ended(std::move(*result), true);
}

namespace {

// The job's directories: out/job-XXXXXX (check/: the job's report) and in/job-XXXXXX
// (model.py, read-only to the worker). The name is unpredictable, so nothing a process left in
// out/ can be waiting under it. Both go when the job ends, unless --keep-job-dirs.
struct JobDirs {
  std::string out_root, task_dir;
  std::unique_ptr<RemovedTree> remove_out, remove_task;
};

Result<JobDirs> make_job_dirs(const FilterSettings& settings, const FilterWorker& worker,
                              const std::string& model_py) {
  JobDirs job;
  job.out_root = worker.out + "/job-XXXXXX";
  if (::mkdtemp(job.out_root.data()) == nullptr) {
    return Status::error("cannot create a job directory in " + cudaagent::quoted(worker.out) +
                         ": " + std::strerror(errno));
  }
  job.task_dir = worker.in + job.out_root.substr(job.out_root.rfind('/'));
  job.remove_out = std::make_unique<RemovedTree>(job.out_root, settings.keep_job_dirs);
  job.remove_task = std::make_unique<RemovedTree>(job.task_dir, settings.keep_job_dirs);
  const std::string model = job.task_dir + "/model.py";
  if ((settings.run_as && ::chmod(job.out_root.c_str(), 0711) != 0) ||
      ::mkdir(job.task_dir.c_str(), settings.run_as ? 0755 : 0700) != 0 ||
      !write_file_atomically(model, model_py) || ::chmod(model.c_str(), 0644) != 0) {
    return Status::error("cannot write the task into " + cudaagent::quoted(job.task_dir));
  }
  return job;
}

// The timing job's samples: eager's statistics, and whether they fall in the window.
std::optional<EagerStats> judge_timing(const FilterSettings& settings, const HarnessReport& report,
                                       std::vector<FilterReason>& reasons) {
  auto computed = eager_stats(report.samples_ms);
  if (!computed) {
    reasons.push_back({"eager_time", "the timing job reported no samples"});
    return std::nullopt;
  }
  if (auto outside = judge_window(computed.value(), settings.window_low_ms, settings.window_high_ms)) {
    reasons.push_back(*outside);
  }
  return computed.value();
}

struct FilterSeconds {
  // seat_wait: waiting for a place on the device (its memory or --jobs), before the job.
  double seat_wait, worker_start, check, time, slot, slot_wait, total;
  double grow_wait = 0;  // of `check`: waiting to take the whole estimate back after torch.compile
  // As the task's process says (never for a verdict): torch.compile's share of the checks and
  // the seconds of each phase.
  std::optional<double> compile;
  std::vector<std::pair<std::string, double>> phases;
};

struct FilterMemory {
  std::uint64_t estimate_bytes = 0, resident_bytes = 0, peak_bytes = 0;
};

// The record's "filter" value.
std::string filter_json(const FilterSettings& settings, const TorchEnv& torch,
                        const std::vector<FilterReason>& reasons,
                        const std::optional<EagerStats>& stats,
                        const std::optional<EagerStats>& compiled_stats, const std::string& compile_text,
                        const std::string& determinism, const FilterSeconds& seconds,
                        const FilterMemory& memory, const std::string& retried_because) {
  std::string json;
  JsonWriter out(json);
  out.begin_object().field("kept", reasons.empty()).key("reasons").raw(reasons_json(reasons));
  for (auto [key, times] : {std::pair{"eager_ms", &stats}, std::pair{"compile_ms", &compiled_stats}}) {
    out.key(key);
    if (*times) {
      const EagerStats& t = **times;
      out.begin_object().field("median", t.median_ms).field("min", t.min_ms);
      out.field("mean", t.mean_ms).field("max", t.max_ms).field("runs", t.runs);
      out.end_object();
    } else {
      out.null();
    }
  }
  out.field("compile", compile_text).key("determinism");
  if (determinism.empty()) {
    out.null();
  } else {
    out.value(determinism);
  }
  out.key("window_ms").begin_array().value(settings.window_low_ms).value(settings.window_high_ms);
  out.end_array().field("device", settings.device);
  if (settings.device == "cuda") out.field("gpu", torch.gpu_name);
  out.field("torch", torch.torch_version).field("python", torch.python_version);
  out.field("seed", settings.seed).field("rules", kFilterRulesVersion);
  out.field("sandbox", settings.sandbox_summary);
  // The reasons of a first run that failed for memory or disk beside other tasks: this result is
  // from a second run with the device to itself.
  if (!retried_because.empty()) out.key("first_run_shared").raw(retried_because);
  // The admission's estimate of the task's device memory beside the peak its job reported (for
  // checking the estimate; 0: unknown).
  out.key("memory").begin_object();
  out.field("estimate_bytes", static_cast<std::int64_t>(memory.estimate_bytes));
  out.field("resident_bytes", static_cast<std::int64_t>(memory.resident_bytes));
  out.field("peak_bytes", static_cast<std::int64_t>(memory.peak_bytes)).end_object();
  out.key("seconds").begin_object().field("seat_wait", seconds.seat_wait);
  out.field("worker_start", seconds.worker_start).field("check", seconds.check);
  out.field("time", seconds.time).field("slot", seconds.slot).field("slot_wait", seconds.slot_wait);
  out.field("grow_wait", seconds.grow_wait);
  if (seconds.compile) out.field("compile", *seconds.compile);
  out.key("phases").begin_object();
  for (const auto& [phase, spent] : seconds.phases) out.field(phase, spent);
  out.end_object().field("total", seconds.total).end_object().end_object();
  return json;
}

}  // namespace

// A task that ran out of GPU memory or disk while other tasks' jobs shared its device (their
// inputs, outputs and caches) says nothing yet about itself: it runs once more with the device
// to itself, and that run decides.
FilterOutcome TaskFilter::State::filter(const std::string& model_py, TaskMemory memory) {
  std::string shared_failure;
  FilterOutcome outcome = filter_once(model_py, memory, "", shared_failure);
  if (outcome.infra || shared_failure.empty()) return outcome;
  std::string unused;
  return filter_once(model_py, memory, shared_failure, unused);
}

// The task's job: the checks, the reading of their findings, then the timing, returning
// through infra() when the machinery fails: kept in one function so that the order reads top to
// bottom.
FilterOutcome TaskFilter::State::filter_once(const std::string& model_py,
                                             TaskMemory memory,
                                             const std::string& retried_because,
                                             std::string& shared_failure) {
  const auto started = SteadyClock::now();
  FilterOutcome outcome;
  const auto infra = [&](std::string why) {
    outcome.infra = true;
    outcome.infra_reason = std::move(why);
    outcome.stopped = settings.stop != nullptr && settings.stop->load() != 0;
    return outcome;
  };
  auto acquired = acquire_worker(!retried_because.empty(), memory);
  if (!acquired) return infra(acquired.status().message());
  const double seat_wait_seconds = since(started);
  FilterWorker& worker = *acquired.value();
  struct Release {
    State& state;
    FilterWorker* worker;
    ~Release() { state.release_worker(worker); }
  } release{*this, &worker};

  auto job = make_job_dirs(settings, worker, model_py);
  if (!job) return infra(job.status().message());
  const std::string& out_root = job.value().out_root;
  const std::string& task_dir = job.value().task_dir;
  double worker_start_seconds = 0;
  if (auto warm = worker.worker->warm_up(); !warm) {
    return infra(warm.status().message());
  } else {
    worker_start_seconds = warm.value();
  }

  std::vector<FilterReason> reasons;
  std::string determinism, compile_text;
  std::optional<EagerStats> stats, compiled_stats;

  const std::optional<std::string> no_compile = compile_unavailable(torch.torch_version);
  if (!settings.compile) {
    compile_text = "skipped: --no-compile";
  } else if (no_compile) {
    compile_text = *no_compile;
  } else {
    compile_text = "not run: the task failed before torch.compile";
  }
  const bool compile_judged = settings.compile && !no_compile;

  // The task's one job: the checks and their findings, read here, then the timing.
  const std::string check_dir = out_root + "/check";
  if (!make_out_dir(check_dir, settings.run_as)) return infra("cannot create '" + check_dir + "'");
  JobSeconds seconds;
  auto ran = run_task_job(worker, task_dir, check_dir, [&](const HarnessReport& report) {
    judge_reported_outputs(report, compile_judged, reasons, determinism, compile_text);
    return reasons.empty();
  }, seconds);
  if (!ran) return infra("task job: " + ran.status().message());
  const HarnessRun& run = ran.value().run;
  RunJudgement judged = judge_run(run.process, run.report, run.report_problem);
  if (judged.end == RunJudgement::End::kInfra) return infra(judged.infra_reason);

  if (!ran.value().checked) {
    // Ended before its checks were done. A failure while compiling is a compile failure; eager's
    // outputs are already judged then, and their findings count.
    const bool failed_in_compile = judged.end == RunJudgement::End::kRejected && judged.phase == "compile";
    if (failed_in_compile) {
      for (const auto& reason : judged.reasons) {
        const std::string detail =
            reason.check == "compile" ? reason.detail : reason.check + ": " + reason.detail;
        compile_text = "failed: " + detail;
        reasons.push_back({"compile", detail});
      }
      judge_reported_outputs(*run.report, false, reasons, determinism, compile_text);
    } else if (judged.end == RunJudgement::End::kCompleted) {
      return infra("the task job ended without its checks: " + run.report_problem);
    } else {
      reasons = judged.reasons;
    }
  } else if (reasons.empty()) {
    // Checked and kept so far: what the timing found.
    reasons.insert(reasons.end(), judged.reasons.begin(), judged.reasons.end());
    if (judged.end == RunJudgement::End::kCompleted) {
      stats = judge_timing(settings, *run.report, reasons);
      if (auto computed = eager_stats(run.report->compile_samples_ms)) compiled_stats = computed.value();
    }
  }
  outcome.kept = reasons.empty();
  if (retried_because.empty() && failed_for_shared_resources(reasons) && share->shared(worker.seat)) {
    shared_failure = reasons_json(reasons);
  }
  FilterSeconds spent{seat_wait_seconds, worker_start_seconds, seconds.check, seconds.after_check,
                      seconds.slot, seconds.slot_wait, since(started), seconds.grow_wait,
                      std::nullopt, {}};
  // For people sizing a filter run (its CPU time is mostly torch.compile); never a verdict.
  if (run.report) {
    if (run.report->compile) spent.compile = run.report->compile->seconds;
    spent.phases = run.report->phase_seconds;
  }
  const FilterMemory used{memory.peak, memory.resident, run.report ? run.report->peak_bytes : 0};
  outcome.json = filter_json(settings, torch, reasons, stats, compiled_stats, compile_text,
                             determinism, spent, used, retried_because);
  return outcome;
}

Result<TaskFilter> TaskFilter::create(FilterSettings settings) {
  if (settings.cache_dir.empty()) settings.cache_dir = cache_dir();
  auto torch = find_torch_for_device(settings.python, settings.cache_dir, settings.device);
  if (!torch) return torch.status();
  auto state = std::make_unique<State>();
  state->harness = share_dir() + "/harness";
  if (!settings.cache_dir.empty() && make_directories(settings.cache_dir + "/locks")) {
    state->lock_dir = settings.cache_dir + "/locks";
  }
  if (settings.device == "cuda") {
    state->devices = settings.gpus.empty() ? std::vector<std::string>{"0"} : settings.gpus;
  } else {
    state->devices = {"cpu"};
  }
  for (const auto& device : state->devices) {
    state->lock_names.push_back(device_lock_name(
        settings.device, device, [](const std::string& index) { return query_gpu_uuid(index); }));
  }
  auto root = make_private_dir(settings.scratch_dir, "cudaagent-filter");
  if (!root) return root.status();
  const std::string pattern = root.value();
  state->root = pattern;
  state->remove_root = std::make_unique<RemovedTree>(pattern, settings.keep_job_dirs);
  if (settings.run_as && ::chmod(pattern.c_str(), 0711) != 0) {
    return Status::error("cannot open " + cudaagent::quoted(pattern) + " to the --run-as user: " +
                         std::strerror(errno));
  }
  std::uint64_t memory_budget = 0;
  if (settings.device == "cuda" && settings.device_memory_fraction > 0) {
    memory_budget = static_cast<std::uint64_t>(settings.device_memory_fraction *
                                               static_cast<double>(torch.value().gpu_memory_bytes));
  }
  state->share = std::make_unique<DeviceShare>(state->devices.size(), memory_budget);
  for (std::size_t i = 0; i < state->devices.size(); ++i) {
    state->timing.push_back(std::make_unique<std::mutex>());
  }
  state->settings = std::move(settings);
  state->torch = std::move(torch).value();
  return TaskFilter(std::move(state));
}

TaskFilter::TaskFilter(std::unique_ptr<State> state) : state_(std::move(state)) {}
TaskFilter::TaskFilter(TaskFilter&&) noexcept = default;
TaskFilter& TaskFilter::operator=(TaskFilter&&) noexcept = default;
TaskFilter::~TaskFilter() = default;

FilterOutcome TaskFilter::run(const std::string& model_py, TaskMemory memory) const {
  return state_->filter(model_py, memory);
}

std::string TaskFilter::job_key(const std::string& model_py) const {
  const FilterSettings& s = state_->settings;
  const TorchEnv& torch = state_->torch;
  Sha256 hash;
  hash.add_part(kFilterRulesVersion).add_part(model_py).add_part(s.device);
  hash.add_part(s.device == "cuda" ? torch.gpu_name : std::string());
  hash.add_part(torch.torch_version).add_part(torch.python_version);
  for (double number : {s.window_low_ms, s.window_high_ms, s.tolerance.atol, s.tolerance.rtol,
                        s.timeout_seconds}) {
    hash.add_part(exact_text(number));
  }
  hash.add_part(std::to_string(s.seed)).add_part(s.compile ? "compile" : "no-compile");
  hash.add_part(std::to_string(s.timing_runs));
  hash.add_part(s.device == "cpu" ? std::to_string(s.memory_limit_bytes) : std::string());
  return hash.hex_digest();
}

const TorchEnv& TaskFilter::torch() const { return state_->torch; }
const FilterSettings& TaskFilter::settings() const { return state_->settings; }

}  // namespace cudaagent
