// Verification of one candidate: gathers the facts in the order they can be known (the snapshot
// and its static policy; model_new.py's static policy; the build, while the task's session opens; the runner's start; the checked
// calls; the runner's end), hands them to decide_verify(), and writes the record's "verify" value.
#include "cudaagent/verify/verify.h"

#include <simdjson.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <optional>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/base/version.h"
#include "cudaagent/candidate/static_policy.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/device/device_lock.h"
#include "cudaagent/records/record.h"
#include "cudaagent/verify/decision.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;

double since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

std::string first_line(const std::string& text) {
  const std::string line = text.substr(0, text.find('\n'));
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

// Bump when the judgement rules change, so stored verdicts of older rules are not reused.
constexpr int kVerifyRules = 3;

// Everything the "verify" value reports besides the decision.
struct Evidence {
  std::vector<PolicyFinding> findings;
  BuildResult build;
  std::vector<std::pair<std::string, double>> timings;
  std::string snapshot_hash, key;
  bool task_reused = false;
  std::string task_phases;  // the owner's account of opening the task (its phases), JSON
};

void write_build(JsonWriter& out, const BuildResult& build) {
  out.key("build").begin_object().field("ok", build.ok);
  out.field("seconds", build.seconds).field("diagnostics", build.diagnostics);
  if (!build.warnings.empty()) out.field("warnings", build.warnings.substr(0, 2000));
  if (!build.ok) {
    // The compiler's own words, when the error lines alone do not explain the failure.
    const std::string& log = build.log;
    out.field("log_tail", log.size() > 3000 ? log.substr(log.size() - 3000) : log);
  }
  out.key("steps").begin_array();
  for (const auto& step : build.steps) {
    out.begin_object().field("source", step.source).field("tool", step.tool);
    out.field("cached", step.cached).field("ok", step.ok).field("seconds", step.seconds);
    out.end_object();
  }
  out.end_array().end_object();
}

void write_checks(JsonWriter& out, const VerifyFacts& facts) {
  out.key("checks").begin_array();
  if (facts.batch) {
    int index = 0;
    for (const CallResult& call : facts.batch->calls) {
      out.begin_object().field("index", index++).field("host_ms", call.host_ms);
      if (call.check) {
        const CallCheck& c = *call.check;
        out.field("match", c.match).field("max_abs_error", c.max_abs_error);
        out.field("max_rel_error", c.max_rel_error).field("worst", c.worst);
        out.field("mismatched", c.mismatched);
        if (!c.match) out.field("failure", c.failure).field("reason", c.reason);
      } else {
        out.field("match", false).field("reason", "the candidate answered with an error");
      }
      out.end_object();
    }
  }
  out.end_array();
}

// A stored verdict of the same job key, marked as a store hit.
Result<VerifyOutcome> outcome_of_stored(std::string_view stored, const std::string& key) {
  std::string json;
  simdjson::dom::parser parser;
  simdjson::dom::element value;
  std::string_view verdict_text;
  std::optional<Verdict> verdict;
  if (parser.parse(stored).get(value) || value["verdict"].get(verdict_text) ||
      !(verdict = parse_verdict(verdict_text)) ||
      !append_with_member(json, stored, "store", "{\"hit\":true}", false)) {
    return Status::error("the store holds a malformed verify result under " + key);
  }
  std::string_view reason;
  if (value["reason"].get(reason)) reason = {};
  return VerifyOutcome{*verdict, std::string(reason), json};
}

// The record's "verify" value: the decision, then everything found on the way to it.
std::string verify_json(const VerifySettings& settings, const TorchEnv& torch, const VerifyFacts& facts,
                        const Evidence& evidence, const VerifyDecision& decision, double total_seconds) {
  std::string json;
  JsonWriter out(json);
  out.begin_object().field("verdict", verdict_name(decision.verdict)).field("reason", decision.reason);
  out.field("device", settings.device).field("snapshot", evidence.snapshot_hash);
  if (!evidence.key.empty()) out.field("job_key", evidence.key);
  write_checks(out, facts);
  out.key("policy").begin_object().key("findings").begin_array();
  for (const auto& finding : evidence.findings) {
    out.begin_object().field("rule", finding.rule).field("path", finding.path);
    out.field("detail", finding.detail).field("verdict", verdict_name(finding.verdict)).end_object();
  }
  out.end_array().key("forbidden_ops").begin_object();
  if (facts.end) {
    for (const auto& [name, count] : facts.end->forbidden_ops) out.field(name, count);
  }
  out.end_object().end_object();
  if (facts.built) write_build(out, evidence.build);
  const ProcessResult* runner = facts.end ? &facts.end->process
                                : facts.start && facts.start->ended ? &*facts.start->ended : nullptr;
  if (runner != nullptr && !runner->err.empty()) {
    const std::string& err = runner->err;
    out.field("candidate_stderr", err.size() > 4000 ? err.substr(err.size() - 4000) : err);
  }
  out.key("session").begin_object().field("task_reused", evidence.task_reused);
  if (!evidence.task_phases.empty()) out.key("task_phases_s").raw(evidence.task_phases);
  if (facts.batch && !facts.batch->calls.empty() && !facts.batch->calls.front().runner_json.empty()) {
    out.key("first_call").raw(facts.batch->calls.front().runner_json);
  }
  out.end_object();
  out.key("sandbox").begin_object().field("launcher", settings.sandbox_summary);
  out.field("candidate_user", settings.candidate_user ? std::to_string(settings.candidate_user->uid) + ":" +
                                                             std::to_string(settings.candidate_user->gid)
                                                       : std::string("the verifier's own"));
  out.key("layers").begin_array();
  if (facts.start) {
    for (const auto& layer : facts.start->sandbox_layers) out.value(layer);
  }
  out.end_array().end_object();
  out.key("timings_s").begin_object();
  for (const auto& [phase, seconds] : evidence.timings) out.field(phase, seconds);
  out.field("total", total_seconds).end_object();
  out.key("settings").begin_object().field("atol", settings.atol).field("rtol", settings.rtol);
  out.field("checks", settings.checks).field("python_policy", settings.python_policy);
  out.field("host_optimization", settings.build.host_optimization).field("call_timer", settings.call_timer);
  out.field("call_lead_us", settings.call_lead_us).field("forward_sync", settings.forward_sync).end_object();
  out.key("versions").begin_object().field("cudaagent", build_version());
  out.field("commit", build_commit()).field("torch", torch.torch_version);
  out.field("python", torch.python_version);
  if (!torch.gpu_name.empty()) out.field("gpu", torch.gpu_name);
  out.end_object().end_object();
  return json;
}

}  // namespace

Verifier::Verifier(VerifySettings settings, TorchEnv torch, std::unique_ptr<Evaluator> evaluator)
    : settings_(std::move(settings)), torch_(std::move(torch)), evaluator_(std::move(evaluator)) {}
Verifier::Verifier(Verifier&&) noexcept = default;
Verifier& Verifier::operator=(Verifier&&) noexcept = default;
Verifier::~Verifier() = default;

std::string Verifier::job_key(const std::string& model_py, const std::string& snapshot_hash) const {
  std::string material;
  JsonWriter key(material);
  key.begin_object().field("stage", "verify").field("rules", kVerifyRules);
  key.field("cudaagent", build_version()).field("harness", evaluator_->harness_hash());
  key.field("task", sha256_hex(model_py)).field("candidate", snapshot_hash);
  key.field("device", settings_.device).field("gpu", torch_.gpu_name);
  key.field("torch", torch_.torch_version).field("arch", settings_.build.cuda_arch);
  key.field("atol", settings_.atol).field("rtol", settings_.rtol);
  key.field("checks", settings_.checks);
  // The GPU timer orders the calls another way (a candidate's unordered side stream reads poison):
  // another key; only when set, so the keys stores already hold still match.
  if (settings_.call_timer != "host") key.field("call_timer", settings_.call_timer);
  if (settings_.call_lead_us > 0) key.field("call_lead_us", settings_.call_lead_us);
  // "call" judges an output left on an unjoined side stream unfinished: another key, only when
  // not "each", the default, so the keys stores already hold still match.
  if (settings_.forward_sync != "each") key.field("forward_sync", settings_.forward_sync);
  // Another -O level may import other symbols; 2, the default, keeps the keys stores already hold.
  if (settings_.build.host_optimization != 2) key.field("host_opt", settings_.build.host_optimization);
  // Its rules are a script of their own, outside the evaluation session's harness hash.
  key.field("python_policy", policy_.key());
  key.end_object();
  return sha256_hex(material);
}

void Verifier::warm_up() { evaluator_->launch_workers(); }

Result<Verifier> Verifier::create(VerifySettings settings) {
  if (settings.cache_dir.empty()) settings.cache_dir = cache_dir();
  // Sandbox binds need absolute paths; a relative CUDAAGENT_CACHE_DIR means "from here".
  if (!settings.cache_dir.empty()) settings.cache_dir = fs::absolute(settings.cache_dir).string();
  if (settings.policy_path.empty()) settings.policy_path = share_dir() + "/harness/policy.json";
  settings.build.cuda = settings.device == "cuda";
  // The clock, forward sync and lead that will run, named in the key and the record rather than
  // "auto"; as profile resolves its defaults on this device (one forward per check; profile's
  // candidate traced by default), so that a check and a timed call wait alike.
  if (auto status = resolve_call_timing(settings.device, 1, true, settings.call_timer, settings.forward_sync,
                                        settings.call_lead_us);
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
  evaluation.policy_path = settings.policy_path;
  evaluation.compile_mode = "none";  // verification never times
  evaluation.atol = settings.atol;
  evaluation.rtol = settings.rtol;
  evaluation.load_timeout_seconds = settings.load_timeout_seconds;
  evaluation.sandbox = settings.sandbox;
  evaluation.candidate_user = settings.candidate_user;
  evaluation.call_timer = settings.call_timer;
  evaluation.forward_sync = settings.forward_sync;
  evaluation.call_lead_us = settings.call_lead_us;
  evaluation.stop = settings.stop;
  auto policy = load_static_policy(settings.python_policy, torch.value().python, share_dir(), settings.policy_path);
  if (!policy) return policy.status();
  auto evaluator = Evaluator::create(evaluation, torch.value());
  if (!evaluator) return evaluator.status();
  Verifier verifier(std::move(settings), std::move(torch).value(), std::move(evaluator).value());
  verifier.policy_ = std::move(policy).value();
  return verifier;
}

// The steps in the order their facts can be known, each ending at finish() when it decides; kept in
// one function so that order reads top to bottom (the rules are decide_verify's, the record
// verify_json's).
Result<VerifyOutcome> Verifier::verify(const VerifyRequest& request) {
  const auto started = SteadyClock::now();
  Evidence evidence;
  VerifyFacts facts;
  facts.checks_wanted = settings_.checks;
  const std::string share = share_dir();
  std::string binding_cpp, registry_h;
  if (!read_whole_file(share + "/workspace/binding.cpp", binding_cpp) ||
      !read_whole_file(share + "/workspace/binding_registry.h", registry_h)) {
    return Status::error("cannot read the pristine binding files in '" + share + "/workspace'");
  }
  const ProtectedFiles protected_files = standard_protected_files(request.model_py, binding_cpp, registry_h);

  // Decides, writes the record, stores it. Every path below ends here.
  const auto finish = [&]() -> Result<VerifyOutcome> {
    const VerifyDecision decision = decide_verify(facts);
    const std::string json = verify_json(settings_, torch_, facts, evidence, decision, since(started));
    std::string reason = decision.reason;
    if (store_ != nullptr && !evidence.key.empty() && decision.verdict != Verdict::kInfraError) {
      // Durable before it is released downstream (cudaagent(7), STORES). A store that cannot
      // take it is reported, not fatal: the verdict itself stands.
      const StoredResult row{evidence.key, "verify", request.id, json};
      if (auto put = store_->put_batch(std::span<const StoredResult>(&row, 1)); !put) {
        reason += " (not stored: " + put.status().message() + ")";
      }
    }
    return VerifyOutcome{decision.verdict, reason, json};
  };

  // 1. Snapshot by content, and the static policy.
  auto phase = SteadyClock::now();
  auto snapshot = request.workspace_dir.empty()
                      ? snapshot_from_files(request.files, SnapshotLimits{}, protected_files)
                      : snapshot_workspace(request.workspace_dir, SnapshotLimits{}, protected_files);
  if (!snapshot) return snapshot.status();
  evidence.snapshot_hash = snapshot.value().content_hash;
  evidence.key = job_key(request.model_py, evidence.snapshot_hash);
  if (store_ != nullptr) {
    auto stored = store_->find(evidence.key);
    if (!stored) return stored.status();
    if (stored.value()) return outcome_of_stored(*stored.value(), evidence.key);
  }
  evidence.timings.emplace_back("snapshot", since(phase));
  // The static policies, before anything of the candidate is built or run (static_policy.h).
  SourcePolicyOutcome source_policy = check_source_policies(snapshot.value(), policy_);
  evidence.findings = std::move(source_policy.findings);
  evidence.timings.insert(evidence.timings.end(), source_policy.timings.begin(), source_policy.timings.end());
  facts.policy = std::move(source_policy.source);
  facts.python_policy = std::move(source_policy.python);
  facts.infra = std::move(source_policy.infra);
  if (facts.policy || facts.python_policy || facts.infra) return finish();

  // 2. The workspace where the candidate's runner will see it; the task's session opens while it
  // builds (its owner starts and loads the pristine model, or is already open for this task).
  const std::string job_dir = evaluator_->candidate_root() + "/job-" + std::to_string(++jobs_);
  const std::string work = job_dir + "/work";
  RemovedTree remove_job(job_dir, settings_.keep_job_dirs);
  if (!make_directories(job_dir, settings_.candidate_user ? 0755 : 0700)) {
    facts.infra = "cannot prepare the job's directory " + cudaagent::quoted(job_dir);
    return finish();
  }
  if (Status status = materialize(snapshot.value(), protected_files, work); !status) {
    facts.infra = status.message();
    return finish();
  }
  evaluator_->launch_workers();
  auto opening = std::async(std::launch::async, [this, &request] {
    const auto began = SteadyClock::now();
    auto info = evaluator_->open_task(request.model_py);
    return std::make_pair(std::move(info), since(began));
  });

  phase = SteadyClock::now();
  BuildOptions build_options = settings_.build;
  if (settings_.sandbox) {
    build_options.runner = sandboxed_build_runner(settings_.sandbox, work, build_options.cache_dir);
  }
  auto built = build_extension(work, work, torch_, build_options);
  evidence.timings.emplace_back("build", since(phase));
  phase = SteadyClock::now();
  auto [task, task_seconds] = opening.get();
  evidence.timings.emplace_back("task_session", task_seconds);
  evidence.timings.emplace_back("task_wait_after_build", since(phase));
  evidence.task_reused = evaluator_->task_reused();
  if (task && !evidence.task_reused) {
    simdjson::dom::parser parser;
    simdjson::dom::element layout;
    simdjson::dom::object phases;
    if (!parser.parse(task.value().layout_json).get(layout) && !layout["phases_s"].get_object().get(phases)) {
      evidence.task_phases = std::string(simdjson::minify(phases));
    }
  }
  if (!built) {
    facts.infra = "build machinery: " + built.status().message();
    return finish();
  }
  evidence.build = built.value();
  facts.built = true;
  facts.build_ok = evidence.build.ok;
  if (!evidence.build.ok) {
    const std::string& diagnostics = evidence.build.diagnostics;
    facts.build_resource = evidence.build.failure == StepFailure::kResource;
    facts.build_reason = facts.build_resource ? "the build hit a limit: " + evidence.build.reason
                         : diagnostics.empty() ? "the build failed: " + first_line(evidence.build.log)
                                               : first_line(diagnostics);
    return finish();
  }

  // The candidate's own objects, what they import against the allow-list (static_policy.h), read
  // in the build's sandbox before anything of the candidate runs.
  ObjectPolicyOutcome objects = check_object_policy(evidence.build, policy_, build_options.runner);
  evidence.timings.insert(evidence.timings.end(), objects.timings.begin(), objects.timings.end());
  if (objects.infra) {
    facts.infra = std::move(objects.infra);
    return finish();
  }
  facts.object_findings = std::move(objects.findings);
  if (!facts.object_findings.empty()) {
    evidence.findings.insert(evidence.findings.end(), facts.object_findings.begin(),
                             facts.object_findings.end());
    return finish();
  }
  if (!task) {
    facts.infra = task.status().message();
    return finish();
  }

  // 3. The candidate's runner, its checked calls, its end: on a GPU, under the device's lock, so
  // that its work never lands inside another job's timed calls (an agent's pipeline checks the
  // next edit while profile times this one). On the CPU builds and everything else share the
  // cores anyway, and serialising the checks would only slow parallel runs.
  std::optional<DeviceLock> lock;
  if (settings_.device == "cuda") {
    phase = SteadyClock::now();
    auto acquired = lock_this_device(settings_.cache_dir, settings_.device, lock_name_,
                                     settings_.lock_timeout_seconds, {}, settings_.stop);
    evidence.timings.emplace_back("device_lock_wait", since(phase));
    if (!acquired) {
      facts.infra = acquired.status().message();
      return finish();
    }
    lock.emplace(std::move(acquired).value());
  }
  phase = SteadyClock::now();
  auto start = evaluator_->attach_candidate(work);
  evidence.timings.emplace_back("candidate_start", since(phase));
  if (!start) {
    facts.infra = "candidate runner: " + start.status().message();
    return finish();
  }
  facts.start = std::move(start).value();
  if (facts.start->ok) {
    phase = SteadyClock::now();
    auto batch = evaluator_->calls("candidate", "candidate",
                                   evaluator_->fresh_seeds(static_cast<std::size_t>(settings_.checks)),
                                   settings_.call_timeout_seconds);
    evidence.timings.emplace_back("checks", since(phase));
    if (!batch) {
      facts.infra = "session owner: " + batch.status().message();
    } else {
      facts.batch = std::move(batch).value();
    }
    phase = SteadyClock::now();
    auto end = evaluator_->end_candidate();
    evidence.timings.emplace_back("candidate_end", since(phase));
    if (end) facts.end = std::move(end).value();
  }
  return finish();
}

}  // namespace cudaagent
