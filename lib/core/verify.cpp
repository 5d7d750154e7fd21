// Verification of one candidate. Order of judgement: the snapshot's policy findings and the static
// source scan (REJECT_POLICY) before anything runs; then the build (FAIL_COMPILE); the reference
// (INFRA_ERROR if it fails: the task, not the candidate, is broken); the candidate process (timeout,
// resource, runtime); its operator report (REJECT_POLICY); and last the trusted comparison of every
// check (REJECT_POLICY for a foreign output type, FAIL_INCORRECT for anything else wrong).
#include "cudaagent/verify.h"

#include <simdjson.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <random>

#include "cudaagent/json_writer.h"
#include "cudaagent/paths.h"
#include "cudaagent/source_policy.h"
#include "cudaagent/tensor_file.h"
#include "cudaagent/version.h"
#include "cudaagent/workspace.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;

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
};

// A private job directory, removed with its contents unless asked to keep it.
class JobDir {
 public:
  JobDir(const std::string& root, bool keep) : keep_(keep) {
    std::string pattern = root + "/cudaagent-verify-XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~JobDir() {
    std::error_code ignored;
    if (!path_.empty() && !keep_) fs::remove_all(path_, ignored);
  }
  JobDir(const JobDir&) = delete;
  JobDir& operator=(const JobDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool keep_;
};

std::uint64_t private_seed() {
  std::random_device device;  // /dev/urandom: nothing the candidate can predict or observe
  return (static_cast<std::uint64_t>(device()) << 32 | device()) & ((1ull << 62) - 1);
}

}  // namespace

Result<Verifier> Verifier::create(VerifySettings settings) {
  if (settings.cache_dir.empty()) settings.cache_dir = cache_dir();
  // Sandbox binds need absolute paths; a relative CUDAAGENT_CACHE_DIR means "from here".
  if (!settings.cache_dir.empty()) settings.cache_dir = fs::absolute(settings.cache_dir).string();
  if (settings.policy_path.empty()) settings.policy_path = share_dir() + "/harness/policy.json";
  settings.build.cuda = settings.device == "cuda";
  if (settings.build.cache_dir.empty() && !settings.cache_dir.empty()) {
    settings.build.cache_dir = settings.cache_dir + "/build";
  }
  auto torch = find_torch(settings.python, settings.cache_dir);
  if (!torch) return torch.status();
  if (settings.device == "cuda" && !torch.value().cuda_available) {
    return Status::error("--device cuda, but torch " + torch.value().torch_version + " in '" +
                         torch.value().python + "' sees no GPU (use --device cpu for CPU tasks)");
  }
  return Verifier(std::move(settings), std::move(torch).value());
}

Result<VerifyOutcome> Verifier::verify(const VerifyRequest& request) const {
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

  // Decide; every path below ends here.
  const auto finish = [&](Verdict verdict, std::string reason) {
    evidence.verdict = verdict;
    evidence.reason = std::move(reason);
    std::string json;
    JsonWriter out(json);
    out.begin_object().field("verdict", verdict_name(verdict)).field("reason", evidence.reason);
    out.field("device", settings_.device).field("snapshot", evidence.snapshot_hash);
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
    out.key("sandbox").begin_object().field("launcher", settings_.sandbox_summary);
    out.key("layers").begin_array();
    for (const auto& layer : evidence.sandbox_layers) out.value(layer);
    out.end_array().end_object();
    out.key("timings_s").begin_object();
    for (const auto& [phase, seconds] : evidence.timings) out.field(phase, seconds);
    out.field("total", since(started)).end_object();
    out.key("settings").begin_object().field("atol", settings_.compare.atol);
    out.field("rtol", settings_.compare.rtol).field("checks", settings_.checks).end_object();
    out.key("versions").begin_object().field("cudaagent", build_version());
    out.field("commit", build_commit()).field("torch", torch_.torch_version);
    out.field("python", torch_.python_version);
    if (!torch_.gpu_name.empty()) out.field("gpu", torch_.gpu_name);
    out.end_object().end_object();
    return VerifyOutcome{verdict, evidence.reason, json};
  };

  // 1. Snapshot by content, and the static policy.
  auto phase = SteadyClock::now();
  auto snapshot = request.workspace_dir.empty()
                      ? snapshot_from_files(request.files, SnapshotLimits{}, protected_files)
                      : snapshot_workspace(request.workspace_dir, SnapshotLimits{}, protected_files);
  if (!snapshot) return snapshot.status();
  evidence.snapshot_hash = snapshot.value().content_hash;
  evidence.findings = snapshot.value().findings;
  for (const auto& found : scan_torch_calls(snapshot.value().files, default_allowed_torch_calls())) {
    evidence.findings.push_back({"torch-compute-in-source", found.file + ":" + std::to_string(found.line),
                                 found.call + " computes with torch; only the candidate's own "
                                 "kernels may compute"});
  }
  evidence.timings.emplace_back("snapshot", since(phase));
  if (!snapshot.value().files.count("model_new.py")) {
    evidence.findings.push_back({"missing-file", "model_new.py", "the candidate has no model_new.py"});
  }
  if (!evidence.findings.empty()) {
    const auto& first = evidence.findings.front();
    return finish(Verdict::kRejectPolicy, first.rule + ": " + first.path + ": " + first.detail);
  }

  // 2. A private job directory: work/ (snapshot + module), task/ (pristine model.py), ref/ (what
  // the reference hands the candidate), expect/ (the reference's inputs and outputs for the
  // comparator: never bound into the candidate's sandbox, or it could replay them), cand/.
  JobDir job(settings_.scratch_dir, settings_.keep_job_dirs);
  if (job.path().empty()) return finish(Verdict::kInfraError, "cannot create a job directory in '" +
                                                                 settings_.scratch_dir + "'");
  const std::string work = job.path() + "/work", task = job.path() + "/task",
                    ref = job.path() + "/ref", expect = job.path() + "/expect",
                    cand = job.path() + "/cand";
  if (auto status = materialize(snapshot.value(), protected_files, work); !status) {
    return finish(Verdict::kInfraError, status.message());
  }
  if (!make_directories(task) || !make_directories(ref) || !make_directories(expect) ||
      !make_directories(cand) ||
      !write_file_atomically(task + "/model.py", request.model_py)) {
    return finish(Verdict::kInfraError, "cannot prepare the job directory '" + job.path() + "'");
  }

  // 3. Build.
  phase = SteadyClock::now();
  BuildOptions build_options = settings_.build;
  if (settings_.sandbox) {
    const auto sandbox = settings_.sandbox;
    const std::string cache = build_options.cache_dir;
    build_options.runner = [sandbox, work, cache](const ProcessSpec& spec) {
      return sandbox(spec, {}, {work, cache});
    };
  }
  auto built = build_extension(work, work, torch_, build_options);
  evidence.timings.emplace_back("build", since(phase));
  if (!built) return finish(Verdict::kInfraError, "build machinery: " + built.status().message());
  evidence.build = built.value();
  evidence.built = true;
  if (!evidence.build.ok) {
    const std::string& diagnostics = evidence.build.diagnostics;
    return finish(Verdict::kFailCompile,
                  diagnostics.empty() ? "the build failed: " + last_line(evidence.build.log)
                                      : last_line(diagnostics.substr(0, diagnostics.find('\n'))));
  }

  // 4. The reference, in its own process, with a private seed on stdin.
  const std::string harness = share + "/harness";
  const auto python_spec = [&](std::vector<std::string> args, double timeout) {
    ProcessSpec spec;
    spec.argv = {torch_.python, "-I", "-B"};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    // USER/LOGNAME: the sandbox has no /etc/passwd, and torch asks getpass.getuser() for its
    // cache paths, which reads these before the password database.
    spec.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + job.path(), "LC_ALL=C.UTF-8",
                "OMP_NUM_THREADS=1", "USER=cudaagent", "LOGNAME=cudaagent"};
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
      spec.env.push_back(std::string("CUDA_VISIBLE_DEVICES=") + visible);
    }
    spec.timeout_seconds = timeout;
    spec.kill_grace_seconds = 2;
    spec.limits.file_size_bytes = std::uint64_t{8} << 30;
    spec.limits.open_files = 4096;
    return spec;
  };
  const auto launch = [&](ProcessSpec spec, const std::vector<std::string>& readable,
                          const std::vector<std::string>& writable) -> Result<ProcessResult> {
    return settings_.sandbox ? settings_.sandbox(spec, readable, writable) : run_process(spec);
  };
  phase = SteadyClock::now();
  const std::string checks = std::to_string(settings_.checks);
  ProcessSpec reference = python_spec({harness + "/reference.py", "--task", task + "/model.py",
                                       "--out", ref, "--private", expect, "--checks", checks,
                                       "--device", settings_.device},
                                      settings_.reference_timeout_seconds);
  reference.stdin_data = std::to_string(private_seed()) + "\n";
  auto reference_run = launch(reference, {task, harness}, {ref, expect});
  evidence.timings.emplace_back("reference", since(phase));
  if (!reference_run) return finish(Verdict::kInfraError, "reference: " + reference_run.status().message());
  if (reference_run.value().outcome != ProcessResult::Outcome::kExited ||
      reference_run.value().exit_code != 0) {
    return finish(Verdict::kInfraError, "the reference failed (" + reference_run.value().describe() +
                                            "): " + last_line(reference_run.value().err));
  }

  // 5. The candidate, sandboxed, on the reference's inputs.
  phase = SteadyClock::now();
  ProcessSpec candidate = python_spec({harness + "/candidate.py", "--work", work, "--ref", ref,
                                       "--out", cand, "--checks", checks, "--device",
                                       settings_.device, "--policy", settings_.policy_path},
                                      settings_.candidate_timeout_seconds);
  if (settings_.device == "cpu") {
    // Only without CUDA: the driver reserves virtual memory of about twice the GPU's, so an
    // address-space limit would break cuInit (research/reliability.md §3.1).
    candidate.limits.address_space_bytes = std::uint64_t{16} << 30;
  }
  auto candidate_run = launch(candidate, {work, ref, harness, settings_.policy_path}, {cand});
  evidence.timings.emplace_back("candidate", since(phase));
  if (!candidate_run) return finish(Verdict::kInfraError, "candidate: " + candidate_run.status().message());
  const ProcessResult& run = candidate_run.value();
  evidence.candidate_stderr = run.err.size() > 4000 ? run.err.substr(run.err.size() - 4000) : run.err;

  // The report is the candidate's own word: read for evidence that lowers a verdict only.
  std::string report_text;
  simdjson::dom::parser parser;
  simdjson::dom::object report;
  const bool has_report = read_whole_file(cand + "/report.json", report_text) &&
                          report_text.size() < (1u << 20) && !parser.parse(report_text).get(report);
  if (has_report) {
    simdjson::dom::array layers;
    if (!report["sandbox_layers"].get_array().get(layers)) {
      for (auto layer : layers) {
        std::string_view text;
        if (!layer.get_string().get(text)) evidence.sandbox_layers.emplace_back(text.substr(0, 64));
      }
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
