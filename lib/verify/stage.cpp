// The verify tool's plumbing: flags, the sandbox hook (probe once, refuse below the minimum unless
// told otherwise), and the two input modes. The judgement itself is lib/verify/verify.cpp.
#include "cudaagent/candidate/build_flags.h"
#include "cudaagent/verify/stage.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/candidate/candidate_record.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/candidate/workspace_input.h"
#include "cudaagent/records/record.h"
#include "cudaagent/records/record_sink.h"
#include "cudaagent/records/record_stage.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/sandbox/runner.h"
#include "cudaagent/sandbox/setup.h"

namespace cudaagent {
namespace {

// Installs settings.sandbox from the probe, or explains why untrusted code cannot run.
Status install_sandbox(VerifyOptions& options, const TorchEnv& torch, Session& session) {
  const SandboxFlags flags{options.no_sandbox, options.allow_unsandboxed, options.bwrap};
  return make_sandbox_hook(flags, torch, options.settings.device, session, options.settings.sandbox,
                           options.settings.sandbox_summary);
}

// A record made from a workspace argument carries what the next stage needs to take it as input
// (the pristine task and the candidate as a workspace), like a record that came in as JSONL.
std::string verified_record(const std::string& id, const std::string& workspace,
                            const std::string& task_source, const std::string& model_py,
                            const VerifyOutcome& outcome) {
  std::string out;
  JsonWriter json(out);
  json.begin_object().field("id", id).field("workspace", workspace).field("task_source", task_source);
  json.key("task").begin_object().field("model_py", model_py).end_object();
  json.key("candidate").begin_object().field("workspace", workspace).end_object();
  json.key("verify").raw(outcome.json).end_object();
  out.push_back('\n');
  return out;
}

// Whether a stop request cut a verification short: the run was asked to stop and the outcome is
// no verdict or INFRA_ERROR (what a stopped sandbox job turns into). Such a record is not
// written: a re-run verifies it again.
bool cut_short(const Result<VerifyOutcome>& outcome, const Session& session) {
  if (session.stop_signal.load() == 0) return false;
  return !outcome || outcome.value().verdict == Verdict::kInfraError;
}

// JSONL mode: {"id", "task": {"model_py"}, "candidate": {"files": {...}} | {"workspace": path}}.
class VerifyStage final : public RecordStage {
 public:
  VerifyStage(Verifier& verifier, Session& session) : verifier_(verifier), session_(session) {}
  std::string_view key() const override { return "verify"; }
  bool slow_records() const override { return true; }  // a sandboxed run per record

  RecordEdit process(const InputRecord& record) override {
    auto source = read_candidate_record(record.object);
    if (!source) return RecordEdit::error(source.status().message());
    VerifyRequest request;
    request.id = std::string(record.id);
    request.model_py = std::move(source.value().model_py);
    request.workspace_dir = std::move(source.value().workspace_dir);
    request.files = std::move(source.value().files);
    auto outcome = verifier_.verify(request);
    // A stop request that reached the verification leaves it without a verdict to keep.
    if (cut_short(outcome, session_)) return RecordEdit::interrupted();
    if (!outcome) return RecordEdit::error(outcome.status().message());
    session_.log.info(cudaagent::quoted(request.id) + ": " + std::string(verdict_name(outcome.value().verdict)) +
                      " (" + outcome.value().reason + ")");
    return RecordEdit::set_key(std::move(outcome.value().json));
  }

 private:
  Verifier& verifier_;
  Session& session_;
};

// Writes one record and flushes it: the directory modes release each record as it is made.
// nullopt when written; else how the run ends: kPipeClosed when the reader went away, or why not.
std::optional<Result<StageEnd>> write_and_flush(RecordSink& sink, const std::string& line) {
  Status status = sink.write(line);
  if (status) status = sink.flush();
  if (status) return std::nullopt;
  return sink.pipe_closed() ? Result<StageEnd>(StageEnd::kPipeClosed) : Result<StageEnd>(status);
}

Result<StageEnd> run_workspaces(VerifyOptions& options, Verifier& verifier, Session& session) {
  auto sink = RecordSink::open(options.common.output);
  if (!sink) return sink.status();
  std::string task_bytes;
  if (!options.task.empty() && !read_whole_file(options.task, task_bytes)) {
    return Status::error("cannot read --task '" + options.task + "'");
  }
  for (std::size_t index = 0; index < options.common.inputs.size(); ++index) {
    const std::string& dir = options.common.inputs[index];
    if (session.stop_signal.load() != 0) break;
    if (!options.common.shard.owns(index)) continue;
    auto input = workspace_input(dir, options.task, task_bytes);
    if (!input) return input.status();
    VerifyRequest request;
    request.workspace_dir = input.value().workspace_dir;
    request.id = input.value().id;
    request.model_py = std::move(input.value().model_py);
    const std::string task_source = input.value().task_source;
    auto outcome = verifier.verify(request);
    if (cut_short(outcome, session)) break;
    std::string line;
    if (!outcome) {
      append_error_record(line, {"verify", dir, 0}, outcome.status().message(), "", request.id);
    } else {
      session.log.info(cudaagent::quoted(dir) + ": " + std::string(verdict_name(outcome.value().verdict)) +
                       " (" + outcome.value().reason + ")");
      line = verified_record(request.id, request.workspace_dir, task_source, request.model_py, outcome.value());
    }
    if (auto end = write_and_flush(sink.value(), line)) return std::move(*end);
  }
  return finish_sink(sink.value(), session);
}

// --check: each workspace's kernels/*.cu through NVRTC, one record per workspace with a "check"
// key; nothing is built, nothing runs. Exit 0 whatever the diagnostics (they are data).
Result<StageEnd> run_check(VerifyOptions& options, Session& session) {
  if (!options.cuda_check) {
    return Status::error("--check needs NVRTC, and this build has no CUDA Toolkit");
  }
  auto sink = RecordSink::open(options.common.output);
  if (!sink) return sink.status();
  NvrtcCheckOptions check_options;
  if (!options.settings.build.cuda_arch.empty()) check_options.arch = options.settings.build.cuda_arch;
  check_options.jobs = std::max(options.common.jobs, 1);
  for (std::size_t index = 0; index < options.common.inputs.size(); ++index) {
    const std::string& dir = options.common.inputs[index];
    if (session.stop_signal.load() != 0) break;
    if (!options.common.shard.owns(index)) continue;
    const std::string workspace = workspace_path(dir);
    const std::string id = workspace_id(workspace);
    std::string line;
    // The same snapshot rules as a verification: only the candidate's own files are read.
    auto snapshot = snapshot_workspace(workspace, SnapshotLimits{}, ProtectedFiles{});
    const auto started = std::chrono::steady_clock::now();
    auto checks = snapshot ? options.cuda_check(snapshot.value().files, check_options)
                           : Result<std::vector<CudaFileCheck>>(snapshot.status());
    if (!checks) {
      append_error_record(line, {"verify", dir, 0}, checks.status().message(), "", id);
    } else {
      bool ok = true;
      JsonWriter json(line);
      json.begin_object().field("id", id).field("workspace", workspace).key("check").begin_object();
      json.key("files").begin_array();
      for (const auto& file : checks.value()) {
        ok = ok && file.ok;
        json.begin_object().field("file", file.file).field("ok", file.ok);
        json.field("checkable", file.checkable).field("seconds", file.seconds);
        json.field("diagnostics", file.diagnostics).end_object();
        session.log.info(cudaagent::quoted(file.file) + ": " +
                         (file.ok ? "ok" : file.checkable ? "errors" : "not checkable"));
      }
      json.end_array().field("ok", ok).field("tool", "nvrtc");
      json.field("seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      json.end_object().end_object();
      line.push_back('\n');
    }
    if (auto end = write_and_flush(sink.value(), line)) return std::move(*end);
  }
  return finish_sink(sink.value(), session);
}

}  // namespace

void add_verify_flags(CLI::App& app, VerifyOptions& options) {
  add_common_flags(app, options.common);
  VerifySettings& s = options.settings;
  app.add_option("--task", options.task, "Pristine model.py for workspace inputs (default: the "
                 "workspace's own, which the candidate could have edited)")->type_name("FILE");
  app.add_option("--device", s.device, "cuda, or cpu for CPU tasks with plain C++ kernels")
      ->capture_default_str()->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--call-timer", s.call_timer, "How the session times each call, checks included: auto "
                 "(gpu on cuda, host on the CPU), host or gpu (as cudaagent-profile's; use the same for "
                 "both, so that a check and a timed call look alike to the candidate)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "host", "gpu"}));
  app.add_option("--call-lead-us", s.call_lead_us, "With --call-timer gpu: the pause before each "
                 "call's window (as cudaagent-profile's, and the same default; give both the same)")
      ->check(CLI::Range(0.0, 10000.0));
  app.add_option("--forward-sync", s.forward_sync, "When the candidate's process waits for the "
                 "device in a check: each (between the forward and the copy, and after it) or call "
                 "(once, after its output is copied in the current stream's order) or auto (call on "
                 "cuda, as cudaagent-profile's default; give both the same)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "each", "call"}));
  app.add_option("--checks", s.checks, "Fresh input sets to compare")->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--atol", s.atol, "Absolute tolerance, scaled down for outputs smaller than 1 "
                 "(see the man page)")->capture_default_str();
  app.add_option("--rtol", s.rtol, "Relative tolerance")->capture_default_str();
  app.add_option("--python", s.python, "Interpreter with torch (default: the first python3 that "
                 "imports torch; or $CUDAAGENT_PYTHON)")->type_name("PATH");
  app.add_option("--arch", s.build.cuda_arch, "CUDA architecture, e.g. 90 (default: the GPU's)");
  add_build_limit_flags(app, s.build.limits);
  add_build_host_opt_flag(app, s.build.host_optimization);
  app.add_option("--cache-dir", s.cache_dir, "Build objects and discovery cache (default: "
                 "$CUDAAGENT_CACHE_DIR or ~/.cache/cudaagent)")->type_name("DIR");
  app.add_option("--timeout", s.call_timeout_seconds, "Wall-clock limit of one call of the "
                 "candidate in seconds")->capture_default_str();
  app.add_option("--load-timeout", s.load_timeout_seconds, "Wall-clock limit of loading the task "
                 "or the candidate (imports, model build) in seconds")->capture_default_str();
  app.add_option("--lock-timeout", s.lock_timeout_seconds, "Seconds to wait for the device lock "
                 "(a GPU's checks take it, as profile's timed rounds do)")->capture_default_str();
  app.add_option("--bwrap", options.bwrap, "The bubblewrap program")->capture_default_str();
  app.add_flag("--allow-unsandboxed", options.allow_unsandboxed, "Run untrusted code even when "
               "the OS sandbox is below the minimum (never for rewards)");
  app.add_flag("--no-sandbox", options.no_sandbox, "Do not use the OS sandbox at all (needs "
               "--allow-unsandboxed)");
  app.add_option("--candidate-user", options.candidate_user, "User the candidate's code runs as: "
                 "auto (nobody when run as root in the sandbox: the process limit does not bind "
                 "root), none, or UID[:GID]")->capture_default_str();
  app.add_flag("--keep-job-dirs", s.keep_job_dirs, "Keep each candidate's job directory");
  app.add_flag("--no-python-policy", options.no_python_policy, "Skip the static check of "
               "model_new.py, to test the layers beneath it (never for rewards)");
  app.add_flag("--check", options.check, "Only compile each workspace's kernels/*.cu with NVRTC "
               "for diagnostics (a fraction of a second; nothing is built or run)");
}

Result<StageEnd> run_verify(VerifyOptions& options, Session& session) {
  auto workspaces = inputs_are_workspaces(options.common.inputs);
  if (!workspaces) return workspaces.status();
  if (options.check) {
    if (!workspaces.value()) return Status::error("--check takes workspace directories");
    return run_check(options, session);
  }
  options.settings.build.jobs = options.common.jobs;
  options.settings.python_policy = !options.no_python_policy;
  auto verifier = Verifier::create(options.settings);
  if (!verifier) return verifier.status();
  if (auto status = install_sandbox(options, verifier.value().torch(), session); !status) return status;
  auto user = resolve_candidate_user(options.candidate_user, static_cast<bool>(options.settings.sandbox));
  if (!user) return Status::error("--candidate-user: " + user.status().message());
  options.settings.candidate_user = user.value();
  // A stop request reaches every wait of the evaluation session (settings.stop) and, through the
  // sandbox hook, every sandboxed process of a verification (its workers, the compilers): they end
  // within a fraction of a second of it; what the stop cut short is never written or stored.
  options.settings.stop = &session.stop_signal;
  options.settings.sandbox = honour_stop(std::move(options.settings.sandbox), &session.stop_signal);
  // The hook was installed after create(): rebuild with the final settings (torch is cached).
  verifier = Verifier::create(options.settings);
  if (!verifier) return verifier.status();
  std::optional<ResultStore> store;
  if (!options.common.db.empty()) {
    auto opened = ResultStore::open(options.common.db);
    if (!opened) return opened.status();
    store.emplace(std::move(opened).value());
    verifier.value().use_store(&*store);
  }
  session.log.info("torch " + verifier.value().torch().torch_version + " (" +
                   verifier.value().torch().python + "), sandbox: " + options.settings.sandbox_summary);
  if (workspaces.value()) return run_workspaces(options, verifier.value(), session);
  VerifyStage stage(verifier.value(), session);
  return run_record_stage(stage, options.common, session);
}

}  // namespace cudaagent
