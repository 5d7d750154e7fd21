// Profiling of one candidate. Order: snapshot and build (a cache hit after verify); the device lock;
// the baseline session (pristine task, clean process: weights, and eager/compile arms unless the
// store has them); the candidate session (sandboxed, fresh worker per job); alternating rounds,
// each timed on the host clock, with hidden output checks after every candidate round; then the
// statistics and the gates. Only the host clock, the baseline's outputs and files this side reads
// itself are trusted; the candidate's replies can only lower its verdict.
#include "cudaagent/profile/profile.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/base/version.h"
#include "cudaagent/candidate/tensor_file.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/device/device_lock.h"
#include "cudaagent/device/gpu_query.h"
#include "cudaagent/profile/timing_report.h"
#include "cudaagent/sandbox/harness_worker.h"
#include "timing_session.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;

double since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// Bump when the measurement protocol changes, so cached baselines of older rules are not reused.
constexpr int kBaselineRules = 1;


std::vector<std::string> harness_env(const std::string& home, const std::string& injection) {
  std::vector<std::string> env = harness_environment(home);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    env.push_back(std::string("CUDA_VISIBLE_DEVICES=") + visible);
  }
  if (!injection.empty()) {
    env.push_back("CUDA_INJECTION64_PATH=" + injection);
    // The injection library's own knobs (which CUPTI to open; provenance off), when set here.
    for (const char* name : {"CUDAAGENT_CUPTI_LIBRARY", "CUDAAGENT_CUPTI_PROVENANCE"}) {
      if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
    }
  }
  return env;
}

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto cut = text.rfind('\n');
  std::string line = cut == std::string::npos ? text : text.substr(cut + 1);
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

}  // namespace

struct ProfileWorkers {
  std::string root, baseline_in, baseline_out, candidate_in, candidate_out, private_dir;
  std::unique_ptr<RemovedTree> remove_root;
  std::unique_ptr<HarnessWorker> baseline, candidate;
  std::uint64_t jobs = 0;
  std::mt19937_64 rng{std::random_device{}() * 0x9e3779b97f4a7c15ULL ^ std::random_device{}()};
  ~ProfileWorkers() {
    baseline.reset();
    candidate.reset();
  }
};

Profiler::Profiler(ProfileSettings settings, TorchEnv torch, std::unique_ptr<ProfileWorkers> workers)
    : settings_(std::move(settings)), torch_(std::move(torch)), workers_(std::move(workers)) {
  std::string harness;
  for (const char* name : {"timing.py", "candidate.py", "tensor_file.py", "worker.py"}) {
    std::string bytes;
    (void)read_whole_file(share_dir() + "/harness/" + name, bytes);
    harness += sha256_hex(bytes);
  }
  harness_hash_ = sha256_hex(harness);
}
Profiler::Profiler(Profiler&&) noexcept = default;
Profiler& Profiler::operator=(Profiler&&) noexcept = default;
Profiler::~Profiler() = default;

std::string Profiler::baseline_key(const std::string& model_py) const {
  const ProfileSettings& s = settings_;
  std::string material;
  JsonWriter key(material);
  key.begin_object().field("stage", "profile-baseline").field("rules", kBaselineRules);
  key.field("harness", harness_hash_).field("task", sha256_hex(model_py));
  key.field("device", s.device).field("gpu", torch_.gpu_name).field("torch", torch_.torch_version);
  key.field("compile_mode", s.compile_mode).field("rounds", s.rounds).field("round_ms", s.round_ms);
  key.field("min_calls", s.min_calls).field("max_calls", s.max_calls).field("pool_bytes", s.pool_bytes);
  key.field("warmup_ms", s.warmup_ms).field("warmup_calls", s.warmup_calls).end_object();
  return sha256_hex(material);
}

Result<Profiler> Profiler::create(ProfileSettings settings) {
  if (settings.cache_dir.empty()) settings.cache_dir = cache_dir();
  if (!settings.cache_dir.empty()) settings.cache_dir = fs::absolute(settings.cache_dir).string();
  settings.build.cuda = settings.device == "cuda";
  if (settings.build.cache_dir.empty() && !settings.cache_dir.empty()) {
    settings.build.cache_dir = settings.cache_dir + "/build";
  }
  if (!settings.kernel_trace_library.empty() && settings.device != "cuda") {
    return Status::error("the kernel trace needs --device cuda");
  }
  auto torch = find_torch_for_device(settings.python, settings.cache_dir, settings.device);
  if (!torch) return torch.status();
  auto workers = std::make_unique<ProfileWorkers>();
  auto root = make_private_dir(settings.scratch_dir, "cudaagent-profile");
  if (!root) return root.status();
  const std::string pattern = root.value();
  workers->root = pattern;
  workers->remove_root = std::make_unique<RemovedTree>(pattern, settings.keep_job_dirs);
  workers->baseline_in = pattern + "/baseline/in";
  workers->baseline_out = pattern + "/baseline/out";
  workers->candidate_in = pattern + "/candidate/in";
  workers->candidate_out = pattern + "/candidate/out";
  workers->private_dir = pattern + "/private";  // bound in no sandbox: copies the comparator reads
  for (const auto& dir : {workers->baseline_in, workers->baseline_out, workers->candidate_in,
                          workers->candidate_out, workers->private_dir}) {
    if (!make_directories(dir)) return Status::error("cannot create " + cudaagent::quoted(dir));
  }
  const std::string harness = share_dir() + "/harness";
  const auto worker = [&](const std::string& name, std::vector<std::string> readable,
                          std::vector<std::string> writable, const std::string& injection) {
    HarnessWorkerPlan plan;
    plan.python = torch.value().python;
    plan.harness_dir = harness;
    plan.log_path = workers->root + "/" + name + "-worker.log";
    plan.env = harness_env(writable.front(), injection);
    plan.readable = std::move(readable);
    plan.writable = std::move(writable);
    plan.wrap = settings.sandbox;
    return make_harness_worker(plan);
  };
  workers->baseline = worker("baseline", {harness, workers->baseline_in}, {workers->baseline_out}, "");
  // kernel_trace: the CUPTI injection library enters the candidate's worker here (readable in its
  // sandbox); its children (the timing sessions) initialise CUDA with it.
  std::vector<std::string> candidate_readable = {harness, workers->candidate_in};
  if (!settings.kernel_trace_library.empty()) candidate_readable.push_back(settings.kernel_trace_library);
  workers->candidate = worker("candidate", candidate_readable, {workers->candidate_out},
                              settings.kernel_trace_library);
  return Profiler(std::move(settings), std::move(torch).value(), std::move(workers));
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
  evidence.started = started;
  evidence.rechecked = !use_store;

  // 1. Snapshot and build, as verify does (the objects are in the build cache by now).
  auto snapshot = request.workspace_dir.empty()
                      ? snapshot_from_files(request.files, SnapshotLimits{}, protected_files)
                      : snapshot_workspace(request.workspace_dir, SnapshotLimits{}, protected_files);
  if (!snapshot) return snapshot.status();
  evidence.snapshot_hash = snapshot.value().content_hash;
  if (!snapshot.value().findings.empty() || !snapshot.value().files.count("model_new.py")) {
    const std::string why = snapshot.value().findings.empty()
                                ? "the candidate has no model_new.py"
                                : snapshot.value().findings.front().rule + ": " + snapshot.value().findings.front().path;
    return evidence.finish(Verdict::kRejectPolicy, why + " (run cudaagent-verify first)");
  }
  ProfileWorkers& workers = *workers_;
  const std::string job = "job-" + std::to_string(++workers.jobs);
  ProfileJobDirs dirs;
  dirs.task = workers.baseline_in + "/" + job;
  dirs.baseline_out = workers.baseline_out + "/" + job;
  dirs.candidate_in = workers.candidate_in + "/" + job;
  dirs.candidate_out = workers.candidate_out + "/" + job;
  dirs.private_dir = workers.private_dir + "/" + job;
  const bool keep = s.keep_job_dirs;
  RemovedTree remove_task(dirs.task, keep), remove_base(dirs.baseline_out, keep),
      remove_cin(dirs.candidate_in, keep), remove_cout(dirs.candidate_out, keep),
      remove_private(dirs.private_dir, keep);
  const std::string work = dirs.candidate_in + "/work";
  if (!make_directories(dirs.task) || !make_directories(dirs.baseline_out + "/state") ||
      !make_directories(dirs.candidate_in + "/task") || !make_directories(dirs.candidate_out) ||
      !make_directories(dirs.private_dir) || !write_file_atomically(dirs.task + "/model.py", request.model_py) ||
      !write_file_atomically(dirs.candidate_in + "/task/model.py", request.model_py)) {
    return evidence.finish(Verdict::kInfraError, "cannot prepare the job's directories in " + cudaagent::quoted(workers.root));
  }
  if (auto status = materialize(snapshot.value(), protected_files, work); !status) {
    return evidence.finish(Verdict::kInfraError, status.message());
  }
  if (auto launched = workers.baseline->launch(); !launched) {
    return evidence.finish(Verdict::kInfraError, "baseline worker: " + launched.message());
  }
  if (auto launched = workers.candidate->launch(); !launched) {
    return evidence.finish(Verdict::kInfraError, "candidate worker: " + launched.message());
  }
  auto phase = SteadyClock::now();
  BuildOptions build_options = s.build;
  if (s.sandbox) build_options.runner = sandboxed_build_runner(s.sandbox, work, build_options.cache_dir);
  auto built = build_extension(work, work, torch_, build_options);
  evidence.timings.emplace_back("build", since(phase));
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

  // 3. The device, exclusively, for every session and round below.
  phase = SteadyClock::now();
  const std::string gpu_index = visible_gpu_index(std::getenv("CUDA_VISIBLE_DEVICES"));
  if (lock_name_.empty()) {
    std::string note;
    lock_name_ = device_lock_name(s.device, gpu_index, [](const std::string& index) { return query_gpu_uuid(index); }, &note);
    if (!note.empty() && log) log(note);
  }
  auto lock = DeviceLock::acquire(s.cache_dir + "/locks", lock_name_, s.lock_timeout_seconds, log);
  if (!lock) return evidence.finish(Verdict::kInfraError, lock.status().message());
  evidence.timings.emplace_back("device_lock_wait", since(phase));
  if (s.device == "cuda") evidence.clocks.push_back(query_gpu(gpu_index));

  TimingRun run(s, workers.rng, dirs, evidence);
  auto measured = run.measure(*workers.baseline, *workers.candidate, cached, gpu_index);
  // A fresh candidate worker for the next job: nothing a candidate left running (a daemon in its
  // sandbox, research §7 case 38) survives into another measurement.
  workers.candidate->stop();
  (void)workers.candidate->launch();
  if (s.device == "cuda") evidence.clocks.push_back(query_gpu(gpu_index));
  if (!measured) return evidence.finish(Verdict::kInfraError, measured.message());
  if (evidence.outcome) return evidence.finish(evidence.outcome->first, evidence.outcome->second);

  // 4. Baselines measured here are stored for the next iterations (only when complete and sound).
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
  return outcome;
}

}  // namespace cudaagent
