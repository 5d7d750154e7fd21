// Profiling of one candidate. Order: snapshot and verify's static policies; build (a cache hit
// after verify) and verify's object policy; the task's evaluation session (its owner, the baseline
// runner unless the store has baselines, the candidate's runner); the device lock; warm-up and
// alternating rounds (measurement.cpp); the candidate's end (processes left behind, the audit);
// then the statistics and the gates.
#include "cudaagent/profile/profile.h"

#include <time.h>

#include <chrono>
#include <filesystem>
#include <future>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/base/version.h"
#include "cudaagent/candidate/static_policy.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/device/device_lock.h"
#include "cudaagent/device/gpu_query.h"
#include "cudaagent/evaluation/call_verdicts.h"
#include "cudaagent/profile/timing_report.h"
#include "measurement.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;

// CLOCK_MONOTONIC in ns: the clock of the owner's call windows and of the kernel trace.
std::uint64_t monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1000000000u + static_cast<std::uint64_t>(now.tv_nsec);
}

double since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// Bump when the measurement protocol changes, so cached baselines of older rules are not reused.
constexpr int kBaselineRules = 2;

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto cut = text.rfind('\n');
  std::string line = cut == std::string::npos ? text : text.substr(cut + 1);
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

// Whether the baselines' runner carries the kernel trace too: only where the candidate's does.
bool traces_baselines(const ProfileSettings& s) {
  return s.device == "cuda" && s.kernel_trace == "on" && s.baseline_trace == "on";
}

}  // namespace

Profiler::Profiler(ProfileSettings settings, TorchEnv torch, std::unique_ptr<Evaluator> evaluator)
    : settings_(std::move(settings)), torch_(std::move(torch)), evaluator_(std::move(evaluator)) {}
Profiler::Profiler(Profiler&&) noexcept = default;
Profiler& Profiler::operator=(Profiler&&) noexcept = default;
Profiler::~Profiler() = default;

std::string Profiler::baseline_key(const std::string& model_py) const {
  const ProfileSettings& s = settings_;
  std::string material;
  JsonWriter key(material);
  key.begin_object().field("stage", "profile-baseline").field("rules", kBaselineRules);
  key.field("harness", evaluator_->harness_hash()).field("task", sha256_hex(model_py));
  key.field("device", s.device).field("gpu", torch_.gpu_name).field("torch", torch_.torch_version);
  key.field("compile_mode", s.compile_mode).field("rounds", s.rounds).field("round_ms", s.round_ms);
  // Adaptive rounds change how many rounds fresh baselines hold: another key.
  key.field("max_rounds", std::max(s.rounds, s.max_rounds)).field("target_ci", s.target_ci);
  // Only when set, so that the keys of baselines stored before the option existed still match.
  if (s.rounds_seconds > 0) key.field("rounds_seconds", s.rounds_seconds);
  key.field("min_calls", s.min_calls).field("max_calls", s.max_calls);
  key.field("warmup_ms", s.warmup_ms).field("warmup_calls", s.warmup_calls);
  // Diagnostics add two CUDA events to every call of every arm: other samples, another key.
  key.field("call_wait", s.call_wait).field("call_diagnostics", s.call_diagnostics);
  key.field("forwards_per_call", s.forwards_per_call).field("forward_sync", s.forward_sync);
  // Another clock, other samples; only when not the default, so older keys still match.
  if (s.call_timer != "host") key.field("call_timer", s.call_timer);
  if (s.call_lead_us > 0) key.field("call_lead_us", s.call_lead_us);
  if (traces_baselines(s)) key.field("baseline_trace", true);  // traced baselines: other samples
  // Placed processes take another share of the machine's cores: other samples, another key.
  key.field("cpu_groups", s.cpu_groups).end_object();
  return sha256_hex(material);
}

Status resolve_rounds(ProfileSettings& s) {
  const bool cuda = s.device == "cuda";
  const bool rounds_given = s.rounds != kAutoRounds;
  if (!rounds_given) s.rounds = cuda ? kAdaptiveLeastRounds : 10;
  if (s.max_rounds == kAutoMaxRounds) s.max_rounds = cuda && !rounds_given ? kAdaptiveMostRounds : 0;
  if (s.target_ci == kAutoTargetCi) s.target_ci = cuda && s.max_rounds > s.rounds ? kAdaptiveTargetCi : 0;
  if (s.rounds < 2) return Status::error("--rounds must be at least 2, got " + std::to_string(s.rounds));
  if (s.max_rounds < 0 || !(s.target_ci >= 0) || !(s.rounds_seconds >= 0)) {
    return Status::error("--max-rounds, --target-ci and --rounds-seconds must not be negative");
  }
  const std::string least = "--rounds " + std::to_string(s.rounds) + (rounds_given ? "" : " (its default here)");
  if (s.max_rounds != 0 && s.max_rounds < s.rounds) {
    return Status::error("--max-rounds " + std::to_string(s.max_rounds) + " is below " + least);
  }
  for (const auto& [name, set] : {std::pair{"--target-ci", s.target_ci > 0},
                                   std::pair{"--rounds-seconds", s.rounds_seconds > 0}}) {
    if (set && s.max_rounds <= s.rounds) {
      return Status::error(std::string(name) + " needs --max-rounds above " + least + ": the rounds it may add");
    }
  }
  return Status::ok();
}

Result<Profiler> Profiler::create(ProfileSettings settings) {
  if (auto status = resolve_rounds(settings); !status) return status;
  if (settings.cache_dir.empty()) settings.cache_dir = cache_dir();
  if (!settings.cache_dir.empty()) settings.cache_dir = fs::absolute(settings.cache_dir).string();
  settings.build.cuda = settings.device == "cuda";
  // The clock, forward sync and lead that will run, named in the key and the record rather than "auto".
  if (auto status = resolve_call_timing(settings.device, settings.forwards_per_call, settings.kernel_trace == "on",
                                        settings.call_timer, settings.forward_sync, settings.call_lead_us);
      !status) {
    return status;
  }
  if (settings.build.cache_dir.empty() && !settings.cache_dir.empty()) {
    settings.build.cache_dir = settings.cache_dir + "/build";
  }
  auto torch = find_torch_for_device(settings.python, settings.cache_dir, settings.device);
  if (!torch) return torch.status();
  EvaluationSettings evaluation;
  evaluation.device = settings.device;
  evaluation.cache_dir = settings.cache_dir;
  evaluation.scratch_dir = settings.scratch_dir;
  evaluation.keep_dirs = settings.keep_job_dirs;
  evaluation.compile_mode = settings.compile_mode;
  evaluation.atol = settings.atol;
  evaluation.rtol = settings.rtol;
  evaluation.load_timeout_seconds = settings.load_timeout_seconds;
  evaluation.sandbox = settings.sandbox;
  evaluation.candidate_user = settings.candidate_user;
  evaluation.audit_fraction = settings.audit_fraction;
  evaluation.call_wait = settings.call_wait;
  evaluation.call_diagnostics = settings.call_diagnostics;
  evaluation.forwards_per_call = settings.forwards_per_call;
  evaluation.forward_sync = settings.forward_sync;
  evaluation.call_timer = settings.call_timer;
  evaluation.call_lead_us = settings.call_lead_us;
  evaluation.cpu_groups = settings.cpu_groups;
  evaluation.stop = settings.stop;
  if (settings.device == "cuda" && settings.kernel_trace == "on") {
    if (settings.kernel_trace_library.empty()) {
      settings.kernel_trace_library = installed_library("libcudaagent_cupti.so");
    }
    if (settings.kernel_trace_library.empty()) {
      return Status::error("cannot trace the candidate's kernels: libcudaagent_cupti.so is not installed beside "
                           "the programs (--kernel-trace-library PATH names it; --kernel-trace off times "
                           "without the trace, whose gates then do not run)");
    }
    evaluation.kernel_trace_library = settings.kernel_trace_library;
    evaluation.kernel_trace_provenance = settings.kernel_provenance;
    evaluation.trace_baselines = traces_baselines(settings);
  }
  auto policy = load_static_policy(settings.python_policy, torch.value().python, share_dir());
  if (!policy) return policy.status();
  auto evaluator = Evaluator::create(evaluation, torch.value());
  if (!evaluator) return evaluator.status();
  Profiler profiler(std::move(settings), std::move(torch).value(), std::move(evaluator).value());
  profiler.policy_ = std::move(policy).value();
  return profiler;
}

Result<ProfileOutcome> Profiler::profile(const ProfileRequest& request,
                                         const std::function<void(const std::string&)>& log) {
  bool flagged_on_stored = false;
  auto outcome = profile_once(request, /*use_store=*/true, log, flagged_on_stored);
  if (!outcome || !flagged_on_stored) return outcome;
  if (log) log("flagged against stored baselines (" + outcome.value().reason.substr(0, 80) +
               "); measuring again beside fresh baselines");
  return profile_once(request, /*use_store=*/false, log, flagged_on_stored);
}

Result<ProfileOutcome> Profiler::profile_once(const ProfileRequest& request, bool use_store,
                                              const std::function<void(const std::string&)>& log,
                                              bool& flagged_on_stored) {
  flagged_on_stored = false;
  const auto started = SteadyClock::now();
  const ProfileSettings& s = settings_;
  const std::string share = share_dir();
  std::string binding_cpp, registry_h;
  if (!read_whole_file(share + "/workspace/binding.cpp", binding_cpp) ||
      !read_whole_file(share + "/workspace/binding_registry.h", registry_h)) {
    return Status::error("cannot read the pristine binding files in '" + share + "/workspace'");
  }
  const ProtectedFiles protected_files = standard_protected_files(request.model_py, binding_cpp, registry_h);
  ProfileEvidence evidence;
  evidence.settings = &s;
  evidence.torch = &torch_;
  evidence.placement = &evaluator_->placement();
  evidence.started = started;
  evidence.rechecked = !use_store;

  // 1. Snapshot and build, as verify does (the objects are in the build cache by now).
  auto snapshot = request.workspace_dir.empty()
                      ? snapshot_from_files(request.files, SnapshotLimits{}, protected_files)
                      : snapshot_workspace(request.workspace_dir, SnapshotLimits{}, protected_files);
  if (!snapshot) return snapshot.status();
  evidence.snapshot_hash = snapshot.value().content_hash;
  // Verify's static policies, the same rules and verdicts (static_policy.h): profile never times
  // code verify would reject.
  const SourcePolicyOutcome source_policy = check_source_policies(snapshot.value(), policy_);
  evidence.timings.insert(evidence.timings.end(), source_policy.timings.begin(), source_policy.timings.end());
  if (auto verdict = source_policy.verdict()) {
    return evidence.finish(verdict->verdict, verdict->reason + " (run cudaagent-verify first)");
  }
  if (source_policy.infra) return evidence.finish(Verdict::kInfraError, *source_policy.infra);
  const std::string job_dir = evaluator_->candidate_root() + "/job-" + std::to_string(++jobs_);
  const std::string work = job_dir + "/work";
  RemovedTree remove_job(job_dir, s.keep_job_dirs);
  if (!make_directories(job_dir, s.candidate_user ? 0755 : 0700)) {
    return evidence.finish(Verdict::kInfraError, "cannot prepare " + cudaagent::quoted(job_dir));
  }
  if (auto status = materialize(snapshot.value(), protected_files, work); !status) {
    return evidence.finish(Verdict::kInfraError, status.message());
  }
  evaluator_->launch_workers();
  auto opening = std::async(std::launch::async, [this, &request] { return evaluator_->open_task(request.model_py); });
  auto phase = SteadyClock::now();
  BuildOptions build_options = s.build;
  if (s.sandbox) build_options.runner = sandboxed_build_runner(s.sandbox, work, build_options.cache_dir);
  auto built = build_extension(work, work, torch_, build_options);
  evidence.timings.emplace_back("build", since(phase));
  phase = SteadyClock::now();
  auto task = opening.get();
  evidence.timings.emplace_back("task_wait_after_build", since(phase));
  if (!built) return evidence.finish(Verdict::kInfraError, "build machinery: " + built.status().message());
  evidence.build_cached = !built.value().steps.empty();
  for (const auto& step : built.value().steps) evidence.build_cached = evidence.build_cached && step.cached;
  if (!built.value().ok) {
    if (built.value().failure == StepFailure::kResource) {
      return evidence.finish(Verdict::kFailResource, "the build hit a limit: " + built.value().reason);
    }
    return evidence.finish(Verdict::kFailCompile, "the build failed: " +
                                                      last_line(built.value().diagnostics.empty()
                                                                    ? built.value().log
                                                                    : built.value().diagnostics));
  }
  // Verify's object policy, before anything of the candidate runs.
  const ObjectPolicyOutcome objects = check_object_policy(built.value(), policy_, build_options.runner);
  evidence.timings.insert(evidence.timings.end(), objects.timings.begin(), objects.timings.end());
  if (objects.infra) return evidence.finish(Verdict::kInfraError, *objects.infra);
  if (auto verdict = object_policy_verdict(objects.findings)) {
    return evidence.finish(verdict->verdict, verdict->reason + " (run cudaagent-verify first)");
  }
  if (!task) return evidence.finish(Verdict::kInfraError, task.status().message());
  evidence.baselines.input_bytes = task.value().input_bytes;
  evidence.baselines.output_bytes = task.value().output_bytes;
  evidence.task_layout_json = task.value().layout_json;
  evidence.forwards_per_call = task.value().forwards;

  // 2. Cached baselines, when the store has them.
  evidence.baseline_key = baseline_key(request.model_py);
  std::optional<BaselineSamples> cached;
  if (store_ != nullptr && use_store && !s.fresh_baselines) {
    auto stored = store_->find(evidence.baseline_key);
    if (!stored) return stored.status();
    if (stored.value()) {
      auto parsed = parse_baseline(*stored.value());
      if (parsed) {
        cached = std::move(parsed).value();
        if (log) log("baselines from the store (" + evidence.baseline_key.substr(0, 12) + ")");
      } else if (log) {
        log("ignoring a malformed cached baseline: " + parsed.status().message());
      }
    }
  }

  // 3. The runners: the baseline's (eager, compile, null: always, for the cost of a call) and
  // the candidate's.
  phase = SteadyClock::now();
  auto baseline = evaluator_->attach_baseline();
  if (!baseline) return evidence.finish(Verdict::kInfraError, "baseline runner: " + baseline.status().message());
  if (!baseline.value().ok) {
    return evidence.finish(Verdict::kInfraError, "the baseline runner did not start: " + baseline.value().problem);
  }
  auto start = evaluator_->attach_candidate(work);
  evidence.timings.emplace_back("runners_start", since(phase));
  if (!start) return evidence.finish(Verdict::kInfraError, "candidate runner: " + start.status().message());
  if (!start.value().ok) {
    if (start.value().ended) {
      const std::string& err = start.value().ended->err;
      evidence.candidate_stderr = err.size() > 4000 ? err.substr(err.size() - 4000) : err;
    }
    return evidence.finish(Verdict::kFailRuntime, "the candidate did not start: " + start.value().problem);
  }
  evidence.sandbox_layers = start.value().sandbox_layers;
  evidence.runner_pid = start.value().pid;
  evidence.watch_start_ns = monotonic_ns();

  // 4. The device, exclusively, for the rounds.
  phase = SteadyClock::now();
  const std::string gpu_index = visible_gpu_index(std::getenv("CUDA_VISIBLE_DEVICES"));
  // A stop request ends the wait for the device too (a queued profile under Slurm's SIGTERM).
  auto acquired = lock_this_device(s.cache_dir, s.device, lock_name_, s.lock_timeout_seconds, log, s.stop);
  if (!acquired) return evidence.finish(Verdict::kInfraError, acquired.status().message());
  std::optional<DeviceLock> lock(std::move(acquired).value());
  evidence.timings.emplace_back("device_lock_wait", since(phase));
  if (s.device == "cuda") evidence.clocks.push_back(query_gpu(gpu_index));
  phase = SteadyClock::now();
  Measurement measurement(s, *evaluator_, evidence);
  Status measured = measurement.run(cached, baseline.value().ready_json.find("\"compile\"") != std::string::npos);
  evidence.timings.emplace_back("rounds", since(phase));
  if (s.device == "cuda") evidence.clocks.push_back(query_gpu(gpu_index));
  lock.reset();  // the device is free before the candidate's end and the statistics

  // 5. The candidate's end: what it left running, what the audit saw, its kernel trace.
  evidence.watch_end_ns = monotonic_ns();
  auto end = evaluator_->end_candidate();
  if (!measured) return evidence.finish(Verdict::kInfraError, measured.message());
  if (end) {
    const std::string& err = end.value().process.err;
    evidence.candidate_stderr = err.size() > 4000 ? err.substr(err.size() - 4000) : err;
  }
  const std::optional<CallVerdict> audited = end ? verdict_of_audit(end.value()) : std::nullopt;
  // A call the audit stopped (values read one by one past the budget): its finding is the verdict.
  if (evidence.outcome_stop && end && stopped_by_audit(*evidence.outcome_stop, end.value())) {
    return evidence.finish(audited->verdict, audited->reason);
  }
  if (evidence.outcome) return evidence.finish(evidence.outcome->first, evidence.outcome->second);
  if (!evaluator_->candidate_trace_path().empty()) {
    // Read whatever the runner left, even when its end went wrong: a trace it did not finish
    // lacks its summary line, which is a gate of its own.
    if (Status analyzed = evidence.analyze_trace(evaluator_->candidate_trace_path(), work); !analyzed) {
      return evidence.finish(Verdict::kInfraError, analyzed.message());
    }
  } else {
    evidence.kernels_status = s.device == "cpu" ? "not traced (CPU)" : "not traced (--kernel-trace off)";
  }
  // 6. Baselines measured here are stored for the next iterations (only when complete and sound).
  if (store_ != nullptr && use_store && !cached && evidence.baselines_sound) {
    const StoredResult row{evidence.baseline_key, "profile-baseline", request.id,
                           baseline_json(evidence.baselines)};
    if (auto put = store_->put_batch(std::span<const StoredResult>(&row, 1)); !put) {
      if (log) log("baselines not stored: " + put.status().message());
    } else {
      evidence.baselines_stored = true;
    }
  }
  ProfileOutcome outcome = evidence.decide();
  flagged_on_stored = cached.has_value() && outcome.verdict == Verdict::kFlagHack;
  // The times stand in the record either way (the A-A benchmark times the task's own Model as a
  // candidate); what the runner's end showed decides the verdict over the gates.
  if (end && end.value().process.stray_processes > 0) {
    return evidence.finish(Verdict::kFlagHack, "the candidate left " + std::to_string(end.value().process.stray_processes) +
                                                   " process(es) running after its calls (ended by the worker)");
  }
  if (audited) return evidence.finish(audited->verdict, audited->reason);
  return outcome;
}

}  // namespace cudaagent
