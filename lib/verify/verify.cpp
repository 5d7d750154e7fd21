// Verification of one candidate. Order of judgement: the snapshot's policy findings and the static
// source scan (REJECT_POLICY) before anything runs; then the build (FAIL_COMPILE); the reference
// (INFRA_ERROR if it fails: the task, not the candidate, is broken); the candidate process (timeout,
// resource, runtime); its operator report (REJECT_POLICY); and last the trusted comparison of every
// check (REJECT_POLICY for a foreign output type, FAIL_INCORRECT for anything else wrong).
#include "cudaagent/verify/verify.h"

#include <simdjson.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/base/version.h"
#include "cudaagent/candidate/python_policy.h"
#include "cudaagent/candidate/source_policy.h"
#include "cudaagent/candidate/tensor_file.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/device/gpu_keeper.h"
#include "cudaagent/records/record.h"
#include "reference.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;

// Copies {"name": seconds, ...} (a harness script's own account of its phases) into the record's
// timings under a prefix, at most 16 of them with short names: the candidate writes its own.
void add_phase_timings(simdjson::dom::object phases, const std::string& prefix,
                       std::vector<std::pair<std::string, double>>& timings) {
  int kept = 0;
  for (auto field : phases) {
    double seconds = 0;
    if (kept == 16 || field.key.size() > 32 || field.value.get(seconds)) continue;
    timings.emplace_back(prefix + std::string(field.key), seconds);
    ++kept;
  }
}

double since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto cut = text.rfind('\n');
  std::string line = cut == std::string::npos ? text : text.substr(cut + 1);
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

// Everything the "verify" key reports, filled as the judgement proceeds.
struct Evidence {
  Verdict verdict = Verdict::kInfraError;
  std::string reason;
  std::vector<PolicyFinding> findings;
  std::string forbidden_ops_json = "{}";
  std::string checks_json = "[]";
  BuildResult build;
  bool built = false;
  std::vector<std::pair<std::string, double>> timings;
  std::string snapshot_hash;
  std::string candidate_stderr;
  std::vector<std::string> sandbox_layers;
  bool reference_prefetched = false;
};

// The environment of every harness process. USER/LOGNAME: the sandbox has no /etc/passwd, and
// torch asks getpass.getuser() for its cache paths, which reads these before the password database.
std::vector<std::string> harness_env(const std::string& home) {
  std::vector<std::string> env = harness_environment(home);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    env.push_back(std::string("CUDA_VISIBLE_DEVICES=") + visible);
  }
  return env;
}

// Bump when the judgement rules change, so stored verdicts of older rules are not reused.
constexpr int kVerifyRules = 2;

}  // namespace

// Directory layout under one private root (0700), so that each worker's sandbox binds fixed
// paths: reference/in (read-only to it: the pristine model.py of each job), reference/out (its
// outputs: ref/ for the candidate, expect/ for the comparator alone), candidate/in (read-only to
// the candidate: the built workspace and the ref/ moved over from reference/out) and
// candidate/out (the only place a candidate job may write, and only its own subdirectory). The
// comparator's expect/ never enters candidate/, so no candidate sandbox can see it.
struct VerifyWorkers {
  std::string root, reference_in, reference_out, candidate_in, candidate_out;
  std::unique_ptr<RemovedTree> remove_root;
  // With --device cuda: holds the GPU open so each job's CUDA start is not a cold one.
  std::optional<GpuKeeper> keeper;
  std::unique_ptr<HarnessWorker> reference, candidate;
  // With prefetching: the next reference of the last task, made while the agent edits.
  std::unique_ptr<ReferenceJob> prefetched;
  std::uint64_t jobs = 0;
  ~VerifyWorkers() {
    prefetched.reset();  // waits for its run: it uses the reference worker
    // Workers next: their sandboxes hold binds below the root.
    reference.reset();
    candidate.reset();
  }
};

Verifier::Verifier(VerifySettings settings, TorchEnv torch, std::unique_ptr<VerifyWorkers> workers)
    : settings_(std::move(settings)), torch_(std::move(torch)), workers_(std::move(workers)) {
  std::string harness;
  const std::string dir = share_dir() + "/harness/";
  for (const char* name : {"reference.py", "candidate.py", "tensor_file.py", "worker.py", "model_policy.py"}) {
    std::string bytes;
    (void)read_whole_file(dir + name, bytes);
    harness += sha256_hex(bytes);
  }
  std::string policy;
  (void)read_whole_file(settings_.policy_path, policy);
  harness_hash_ = sha256_hex(harness + sha256_hex(policy));
}

std::string Verifier::job_key(const std::string& model_py, const std::string& snapshot_hash) const {
  std::string material;
  JsonWriter key(material);
  key.begin_object().field("stage", "verify").field("rules", kVerifyRules);
  key.field("cudaagent", build_version()).field("harness", harness_hash_);
  key.field("task", sha256_hex(model_py)).field("candidate", snapshot_hash);
  key.field("device", settings_.device).field("gpu", torch_.gpu_name);
  key.field("torch", torch_.torch_version).field("arch", settings_.build.cuda_arch);
  key.field("atol", settings_.compare.atol).field("rtol", settings_.compare.rtol);
  key.field("checks", settings_.checks).field("python_policy", settings_.python_policy).end_object();
  return sha256_hex(material);
}
Verifier::Verifier(Verifier&&) noexcept = default;
Verifier& Verifier::operator=(Verifier&&) noexcept = default;
Verifier::~Verifier() = default;

Result<double> Verifier::warm_up() {
  auto reference = workers_->reference->warm_up();
  if (!reference) return reference.status();
  auto candidate = workers_->candidate->warm_up();
  if (!candidate) return candidate.status();
  return reference.value() + candidate.value();
}

Result<Verifier> Verifier::create(VerifySettings settings) {
  if (settings.cache_dir.empty()) settings.cache_dir = cache_dir();
  // Sandbox binds need absolute paths; a relative CUDAAGENT_CACHE_DIR means "from here".
  if (!settings.cache_dir.empty()) settings.cache_dir = fs::absolute(settings.cache_dir).string();
  if (settings.policy_path.empty()) settings.policy_path = share_dir() + "/harness/policy.json";
  settings.build.cuda = settings.device == "cuda";
  if (settings.build.cache_dir.empty() && !settings.cache_dir.empty()) {
    settings.build.cache_dir = settings.cache_dir + "/build";
  }
  auto torch = find_torch_for_device(settings.python, settings.cache_dir, settings.device);
  if (!torch) return torch.status();
  auto workers = std::make_unique<VerifyWorkers>();
  auto root = make_private_dir(settings.scratch_dir, "cudaagent-verify");
  if (!root) return root.status();
  const std::string pattern = root.value();
  workers->root = pattern;
  if (settings.device == "cuda") workers->keeper.emplace(GpuKeeper::open());
  workers->remove_root = std::make_unique<RemovedTree>(pattern, settings.keep_job_dirs);
  workers->reference_in = pattern + "/reference/in";
  workers->reference_out = pattern + "/reference/out";
  workers->candidate_in = pattern + "/candidate/in";
  workers->candidate_out = pattern + "/candidate/out";
  for (const auto& dir : {workers->reference_in, workers->reference_out, workers->candidate_in,
                          workers->candidate_out}) {
    if (!make_directories(dir)) return Status::error("cannot create " + cudaagent::quoted(dir));
  }
  const std::string harness = share_dir() + "/harness";
  const auto worker = [&](const std::string& name, std::vector<std::string> readable,
                          std::vector<std::string> writable) {
    HarnessWorkerPlan plan;
    plan.python = torch.value().python;
    plan.harness_dir = harness;
    plan.log_path = workers->root + "/" + name + "-worker.log";
    plan.env = harness_env(writable.front());
    plan.readable = std::move(readable);
    plan.writable = std::move(writable);
    plan.wrap = settings.sandbox;
    return make_harness_worker(plan);
  };
  workers->reference = worker("reference", {harness, workers->reference_in}, {workers->reference_out});
  workers->candidate = worker("candidate", {harness, settings.policy_path, workers->candidate_in},
                              {workers->candidate_out});
  return Verifier(std::move(settings), std::move(torch).value(), std::move(workers));
}

Result<VerifyOutcome> Verifier::verify(const VerifyRequest& request) {
  const auto started = SteadyClock::now();
  Evidence evidence;
  const std::string share = share_dir();
  std::string binding_cpp, registry_h;
  if (!read_whole_file(share + "/workspace/binding.cpp", binding_cpp) ||
      !read_whole_file(share + "/workspace/binding_registry.h", registry_h)) {
    return Status::error("cannot read the pristine binding files in '" + share + "/workspace'");
  }
  const ProtectedFiles protected_files =
      standard_protected_files(request.model_py, binding_cpp, registry_h);

  std::string key;  // the store's job key, once the snapshot is known

  // Decide; every path below ends here.
  const auto finish = [&](Verdict verdict, std::string reason) {
    evidence.verdict = verdict;
    evidence.reason = std::move(reason);
    std::string json;
    JsonWriter out(json);
    out.begin_object().field("verdict", verdict_name(verdict)).field("reason", evidence.reason);
    out.field("device", settings_.device).field("snapshot", evidence.snapshot_hash);
    if (!key.empty()) out.field("job_key", key);
    out.key("checks").raw(evidence.checks_json);
    out.key("policy").begin_object().key("findings").begin_array();
    for (const auto& finding : evidence.findings) {
      out.begin_object().field("rule", finding.rule).field("path", finding.path);
      out.field("detail", finding.detail).end_object();
    }
    out.end_array().key("forbidden_ops").raw(evidence.forbidden_ops_json).end_object();
    if (evidence.built) {
      out.key("build").begin_object().field("ok", evidence.build.ok);
      out.field("seconds", evidence.build.seconds).field("diagnostics", evidence.build.diagnostics);
      if (!evidence.build.warnings.empty()) out.field("warnings", evidence.build.warnings.substr(0, 2000));
      if (!evidence.build.ok) {
        // The compiler's own words, when the error lines alone do not explain the failure.
        const std::string& log = evidence.build.log;
        out.field("log_tail", log.size() > 3000 ? log.substr(log.size() - 3000) : log);
      }
      out.key("steps").begin_array();
      for (const auto& step : evidence.build.steps) {
        out.begin_object().field("source", step.source).field("tool", step.tool);
        out.field("cached", step.cached).field("ok", step.ok).field("seconds", step.seconds);
        out.end_object();
      }
      out.end_array().end_object();
    }
    if (!evidence.candidate_stderr.empty()) out.field("candidate_stderr", evidence.candidate_stderr);
    if (evidence.reference_prefetched) out.field("reference_prefetched", true);
    out.key("sandbox").begin_object().field("launcher", settings_.sandbox_summary);
    out.key("layers").begin_array();
    for (const auto& layer : evidence.sandbox_layers) out.value(layer);
    out.end_array().end_object();
    out.key("timings_s").begin_object();
    for (const auto& [phase, seconds] : evidence.timings) out.field(phase, seconds);
    out.field("total", since(started)).end_object();
    out.key("settings").begin_object().field("atol", settings_.compare.atol);
    out.field("rtol", settings_.compare.rtol).field("checks", settings_.checks);
    out.field("python_policy", settings_.python_policy).end_object();
    out.key("versions").begin_object().field("cudaagent", build_version());
    out.field("commit", build_commit()).field("torch", torch_.torch_version);
    out.field("python", torch_.python_version);
    if (!torch_.gpu_name.empty()) out.field("gpu", torch_.gpu_name);
    out.end_object().end_object();
    if (store_ != nullptr && !key.empty() && verdict != Verdict::kInfraError) {
      // Durable before it is released downstream (cudaagent(7), STORES). A store that cannot take it is
      // reported, not fatal: the verdict itself stands.
      const StoredResult row{key, "verify", request.id, json};
      if (auto put = store_->put_batch(std::span<const StoredResult>(&row, 1)); !put) {
        evidence.reason += " (not stored: " + put.status().message() + ")";
      }
    }
    return VerifyOutcome{verdict, evidence.reason, json};
  };

  // 1. Snapshot by content, and the static policy.
  auto phase = SteadyClock::now();
  auto snapshot = request.workspace_dir.empty()
                      ? snapshot_from_files(request.files, SnapshotLimits{}, protected_files)
                      : snapshot_workspace(request.workspace_dir, SnapshotLimits{}, protected_files);
  if (!snapshot) return snapshot.status();
  evidence.snapshot_hash = snapshot.value().content_hash;
  key = job_key(request.model_py, evidence.snapshot_hash);
  if (store_ != nullptr) {
    auto stored = store_->find(key);
    if (!stored) return stored.status();
    if (stored.value()) {
      std::string json;
      simdjson::dom::parser parser;
      simdjson::dom::element value;
      std::string_view verdict_text;
      std::optional<Verdict> verdict;
      if (parser.parse(*stored.value()).get(value) || value["verdict"].get(verdict_text) ||
          !(verdict = parse_verdict(verdict_text)) ||
          !append_with_member(json, *stored.value(), "store", "{\"hit\":true}", false)) {
        return Status::error("the store holds a malformed verify result under " + key);
      }
      std::string_view reason;
      if (value["reason"].get(reason)) reason = {};
      return VerifyOutcome{*verdict, std::string(reason), json};
    }
  }
  evidence.findings = snapshot.value().findings;
  for (const auto& found : scan_torch_calls(snapshot.value().files, default_allowed_torch_calls())) {
    evidence.findings.push_back({"torch-compute-in-source", found.file + ":" + std::to_string(found.line),
                                 found.call + " computes with torch; only the candidate's own "
                                 "kernels may compute"});
  }
  evidence.timings.emplace_back("snapshot", since(phase));
  std::optional<Verdict> python_verdict;
  std::string python_reason;
  if (const auto model_new = snapshot.value().files.find("model_new.py");
      model_new == snapshot.value().files.end()) {
    evidence.findings.push_back({"missing-file", "model_new.py", "the candidate has no model_new.py"});
  } else if (settings_.python_policy) {
    // The static policy of model_new.py (python_policy.h): what could switch the runtime audit
    // off is refused before any of it runs.
    phase = SteadyClock::now();
    auto report = check_python_policy(torch_.python, share + "/harness/model_policy.py", model_new->second);
    if (!report) return finish(Verdict::kInfraError, "python policy: " + report.status().message());
    PythonPolicyDecision decision = decide_python_policy(report.value());
    evidence.findings.insert(evidence.findings.end(), decision.findings.begin(), decision.findings.end());
    python_verdict = decision.verdict;
    python_reason = std::move(decision.reason);
    evidence.timings.emplace_back("python_policy", since(phase));
  }
  if (python_verdict == Verdict::kFlagHack) return finish(Verdict::kFlagHack, python_reason);
  if (python_verdict == Verdict::kFailCompile && evidence.findings.empty()) {
    return finish(Verdict::kFailCompile, python_reason);
  }
  if (!evidence.findings.empty()) {
    const auto& first = evidence.findings.front();
    return finish(Verdict::kRejectPolicy, first.rule + ": " + first.path + ": " + first.detail);
  }

  // 2. The job's directories (see VerifyWorkers): task/ and the reference's ref/ and expect/
  // under reference/, the built workspace work/ and the candidate's out/ under candidate/.
  VerifyWorkers& workers = *workers_;
  const std::string job_name = "job-" + std::to_string(++workers.jobs);
  const std::string candidate_in = workers.candidate_in + "/" + job_name,
                    work = candidate_in + "/work", ref = candidate_in + "/ref",
                    cand = workers.candidate_out + "/" + job_name;
  const bool keep = settings_.keep_job_dirs;
  RemovedTree remove_candidate_in(candidate_in, keep), remove_cand(cand, keep);
  if (!make_directories(candidate_in) || !make_directories(cand)) {
    return finish(Verdict::kInfraError, "cannot prepare the job's directories in " + cudaagent::quoted(workers.root));
  }
  if (auto status = materialize(snapshot.value(), protected_files, work); !status) {
    return finish(Verdict::kInfraError, status.message());
  }

  // 3. The reference: the one prefetched for this task, else a fresh child of the reference
  // worker with a private seed, running while the candidate builds (and both workers start).
  const std::string harness = share + "/harness";
  const std::string checks = std::to_string(settings_.checks);
  const auto reference_spec = [&](const std::string& name) {
    ReferenceJobSpec spec;
    spec.model_py = request.model_py;
    spec.task_dir = workers.reference_in + "/" + name;
    spec.out_dir = workers.reference_out + "/" + name;
    spec.harness_dir = harness;
    spec.device = settings_.device;
    spec.checks = settings_.checks;
    spec.timeout_seconds = settings_.reference_timeout_seconds;
    spec.keep_dirs = keep;
    return spec;
  };
  std::unique_ptr<ReferenceJob> reference_job;
  if (workers.prefetched && workers.prefetched->task_hash() == sha256_hex(request.model_py)) {
    reference_job = std::move(workers.prefetched);
    evidence.reference_prefetched = true;
  } else {
    workers.prefetched.reset();  // another task's: waited for, then dropped
    if (auto launched = workers.reference->launch(); !launched) {
      return finish(Verdict::kInfraError, "reference worker: " + launched.message());
    }
    auto started_reference = ReferenceJob::start(*workers.reference, reference_spec(job_name));
    if (!started_reference) return finish(Verdict::kInfraError, started_reference.status().message());
    reference_job = std::move(started_reference).value();
  }
  if (auto launched = workers.candidate->launch(); !launched) {
    return finish(Verdict::kInfraError, "candidate worker: " + launched.message());
  }
  const std::string expect = reference_job->expect_dir();

  phase = SteadyClock::now();
  BuildOptions build_options = settings_.build;
  if (settings_.sandbox) {
    build_options.runner = sandboxed_build_runner(settings_.sandbox, work, build_options.cache_dir);
  }
  auto built = build_extension(work, work, torch_, build_options);
  evidence.timings.emplace_back("build", since(phase));
  if (!built) return finish(Verdict::kInfraError, "build machinery: " + built.status().message());
  evidence.build = built.value();
  evidence.built = true;
  if (!evidence.build.ok) {
    // Its reference was never handed to a candidate: still private, it serves the next one.
    if (settings_.prefetch_reference && !workers.prefetched) workers.prefetched = std::move(reference_job);
    const std::string& diagnostics = evidence.build.diagnostics;
    return finish(Verdict::kFailCompile,
                  diagnostics.empty() ? "the build failed: " + last_line(evidence.build.log)
                                      : last_line(diagnostics.substr(0, diagnostics.find('\n'))));
  }

  // The reference's result, waited for after the build.
  phase = SteadyClock::now();
  ReferenceRun reference_done = reference_job->wait();
  if (!reference_done.warm_wait) {
    return finish(Verdict::kInfraError, "reference worker: " + reference_done.warm_wait.status().message());
  } else if (reference_done.warm_wait.value() > 0) {
    evidence.timings.emplace_back("reference_worker_wait", reference_done.warm_wait.value());
  }
  evidence.timings.emplace_back("reference", reference_done.seconds);
  evidence.timings.emplace_back("reference_wait_after_build", since(phase));
  auto& reference_run = reference_done.run;
  if (!reference_run) return finish(Verdict::kInfraError, "reference: " + reference_run.status().message());
  if (std::string phases; read_whole_file(expect + "/phases.json", phases)) {
    simdjson::dom::parser phase_parser;
    simdjson::dom::object object;
    if (!phase_parser.parse(phases).get(object)) add_phase_timings(object, "reference.", evidence.timings);
  }
  if (reference_run.value().outcome != ProcessResult::Outcome::kExited ||
      reference_run.value().exit_code != 0) {
    return finish(Verdict::kInfraError, "the reference failed (" + reference_run.value().describe() +
                                            "): " + last_line(reference_run.value().err));
  }
  // What the candidate may read moves over to its side; expect/ stays behind.
  std::error_code moved;
  fs::remove(ref, moved);
  fs::rename(reference_job->made_dir(), ref, moved);
  if (moved) return finish(Verdict::kInfraError, "cannot hand the reference's data over: " + moved.message());
  if (settings_.prefetch_reference) {
    // The reference worker is free: the next candidate's reference starts now.
    auto next = ReferenceJob::start(*workers.reference, reference_spec("prefetch-" + std::to_string(++workers.jobs)));
    if (next) workers.prefetched = std::move(next).value();
  }

  // 5. The candidate, in a fresh child of the sandboxed candidate worker.
  if (auto warm = workers.candidate->warm_up(); !warm) {
    return finish(Verdict::kInfraError, "candidate worker: " + warm.status().message());
  } else if (warm.value() > 0) {
    evidence.timings.emplace_back("candidate_worker_wait", warm.value());
  }
  phase = SteadyClock::now();
  HarnessJob candidate;
  candidate.script = harness + "/candidate.py";
  candidate.args = {"--work", work, "--ref", ref, "--out", cand, "--checks", checks,
                    "--device", settings_.device, "--policy", settings_.policy_path};
  candidate.timeout_seconds = settings_.candidate_timeout_seconds;
  candidate.limits.file_size_bytes = std::uint64_t{8} << 30;
  if (settings_.device == "cpu") {
    // Only without CUDA: the driver reserves virtual memory of about twice the GPU's, so an
    // address-space limit would break cuInit.
    candidate.limits.address_space_bytes = std::uint64_t{16} << 30;
  }
  // The host-memory bound that works with CUDA too (seen on the H200: without it a memory bomb
  // ran until the timeout).
  candidate.limits.data_bytes = std::uint64_t{16} << 30;
  auto candidate_run = workers.candidate->run(candidate);
  evidence.timings.emplace_back("candidate", since(phase));
  if (!candidate_run) return finish(Verdict::kInfraError, "candidate: " + candidate_run.status().message());
  const ProcessResult& run = candidate_run.value();
  evidence.candidate_stderr = run.err.size() > 4000 ? run.err.substr(run.err.size() - 4000) : run.err;

  // The report is the candidate's own word: read for evidence that lowers a verdict only.
  std::string report_text;
  simdjson::dom::parser parser;
  simdjson::dom::object report;
  // As hostile input: never through a symlink (it could point at the comparator's own files),
  // never a FIFO or device (opening one would block us), size-capped.
  const bool has_report = read_untrusted_file(cand + "/report.json", 1u << 20, report_text) &&
                          !parser.parse(report_text).get(report);
  if (has_report) {
    simdjson::dom::array layers;
    if (!report["sandbox_layers"].get_array().get(layers)) {
      for (auto layer : layers) {
        std::string_view text;
        if (!layer.get_string().get(text)) evidence.sandbox_layers.emplace_back(text.substr(0, 64));
      }
    }
    simdjson::dom::object phases;
    if (!report["phases_s"].get_object().get(phases)) {
      add_phase_timings(phases, "candidate_reported.", evidence.timings);
    }
  }

  if (run.outcome == ProcessResult::Outcome::kTimedOut) {
    return finish(Verdict::kFailTimeout, "the candidate " + run.describe());
  }
  const std::string tail = last_line(run.err);
  if (run.out_truncated || run.err_truncated) {
    return finish(Verdict::kFailResource, "the candidate flooded its output (capture capped)");
  }
  if (run.outcome == ProcessResult::Outcome::kSignaled &&
      (run.signal == SIGXCPU || run.signal == SIGXFSZ || run.signal == SIGKILL)) {
    return finish(Verdict::kFailResource, "the candidate was " + run.describe());
  }
  if (tail.find("out of memory") != std::string::npos || tail.find("MemoryError") != std::string::npos) {
    return finish(Verdict::kFailResource, "the candidate ran out of memory: " + tail);
  }
  if (run.outcome != ProcessResult::Outcome::kExited || run.exit_code != 0) {
    return finish(Verdict::kFailRuntime, "the candidate " + run.describe() +
                                             (tail.empty() ? "" : ": " + tail));
  }
  if (run.stray_processes > 0) {
    // Nothing an honest candidate does leaves a process behind; one that outlives its job could
    // disturb the next candidates of this worker (research §7 case 38). The worker ended it.
    return finish(Verdict::kFlagHack, "the candidate left " + std::to_string(run.stray_processes) +
                                          " process(es) running after its job (ended by the worker)");
  }
  if (!has_report) return finish(Verdict::kFailRuntime, "the candidate left no report");
  simdjson::dom::object forbidden;
  if (!report["forbidden_ops"].get_object().get(forbidden) && forbidden.size() > 0) {
    evidence.forbidden_ops_json = simdjson::minify(forbidden);
    std::string names;
    for (auto field : forbidden) names += (names.empty() ? "" : ", ") + std::string(field.key);
    return finish(Verdict::kRejectPolicy, "the candidate ran torch compute operators (setup: = while imported or built): " + names.substr(0, 300));
  }

  // 6. The trusted comparison, check by check.
  phase = SteadyClock::now();
  std::string checks_json;
  JsonWriter list(checks_json);
  list.begin_array();
  std::optional<std::pair<Verdict, std::string>> failure;
  for (int check = 0; check < settings_.checks; ++check) {
    const std::string k = std::to_string(check);
    list.begin_object().field("index", check);
    auto expected = read_tensor_file(expect + "/expected_" + k + ".bin");
    auto actual = read_tensor_file(cand + "/out_" + k + ".bin");
    if (!expected) {
      list.field("error", "reference output: " + expected.status().message()).end_object();
      failure = {Verdict::kInfraError, "check " + k + ": the reference output is unreadable"};
      break;
    }
    if (!actual) {
      list.field("error", actual.status().message()).end_object();
      // No complete result is a runtime failure (the candidate exited early); a result that is
      // there but malformed is an incorrect one.
      const bool missing = !fs::exists(cand + "/out_" + k + ".bin");
      failure = {missing ? Verdict::kFailRuntime : Verdict::kFailIncorrect,
                 "check " + k + ": " + (missing ? std::string("the candidate produced no output")
                                                : actual.status().message())};
      break;
    }
    const CompareResult compared = compare_outputs(expected.value(), actual.value(), settings_.compare);
    list.field("match", compared.match).field("max_abs_error", compared.max_abs_error);
    list.field("max_rel_error", compared.max_rel_error).field("worst", compared.worst_path);
    list.field("mismatched", static_cast<std::int64_t>(compared.mismatched_elements));
    if (!compared.match) list.field("reason", compared.reason);
    auto inputs_before = read_tensor_file(expect + "/inputs_" + k + ".bin");
    auto inputs_after = read_tensor_file(cand + "/inputs_after_" + k + ".bin");
    const bool inputs_kept = inputs_before && inputs_after &&
                             tensors_bytes_equal(inputs_before.value(), inputs_after.value());
    list.field("inputs_unmodified", inputs_kept).end_object();
    if (!compared.match && !failure) {
      const Verdict verdict = compared.failure == CompareFailure::kType ? Verdict::kRejectPolicy
                              : compared.failure == CompareFailure::kUncomparable ? Verdict::kInfraError
                                                                                  : Verdict::kFailIncorrect;
      failure = {verdict, "check " + k + ": " + compared.reason};
    }
    if (!inputs_kept && !failure) failure = {Verdict::kFailIncorrect, "check " + k + ": the candidate modified its inputs"};
  }
  list.end_array();
  evidence.checks_json = checks_json;
  evidence.timings.emplace_back("compare", since(phase));
  if (failure) return finish(failure->first, failure->second);
  simdjson::dom::array aliasing;
  if (!report["aliasing"].get_array().get(aliasing) && aliasing.size() > 0) {
    return finish(Verdict::kFailIncorrect, "an output aliases an input's memory");
  }
  return finish(Verdict::kPass, "all " + checks + " checks match within atol=" +
                                    std::to_string(settings_.compare.atol).substr(0, 6) + ", rtol=" +
                                    std::to_string(settings_.compare.rtol).substr(0, 6));
}

}  // namespace cudaagent
