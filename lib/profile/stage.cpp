// The profile tool's plumbing: flags, the sandbox (as verify's), the store, and the two input
// modes. The measurement itself is lib/profile/profile.cpp.
#include "cudaagent/profile/stage.h"


#include <filesystem>
#include <optional>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/candidate/candidate_record.h"
#include "cudaagent/candidate/workspace_input.h"
#include "cudaagent/profile/report.h"
#include "cudaagent/records/record.h"
#include "cudaagent/records/record_sink.h"
#include "cudaagent/records/record_stage.h"
#include "cudaagent/records/result_store.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

// JSONL mode: the records cudaagent-verify writes ({"id", "task": {"model_py"}, "candidate":
// {"files"} | {"workspace"}, "verify": {"verdict"}}); only PASS is timed.
class ProfileStage final : public RecordStage {
 public:
  ProfileStage(Profiler& profiler, Session& session) : profiler_(profiler), session_(session) {}
  std::string_view key() const override { return "profile"; }

  RecordEdit process(const InputRecord& record) override {
    std::string_view verdict;
    if (record.object["verify"]["verdict"].get_string().get(verdict)) {
      return RecordEdit::error("record has no verify.verdict (run cudaagent-verify first)");
    }
    if (verdict != "PASS") return RecordEdit::pass_through();
    auto source = read_candidate_record(record.object);
    if (!source) return RecordEdit::error(source.status().message());
    ProfileRequest request;
    request.id = std::string(record.id);
    request.model_py = std::move(source.value().model_py);
    request.workspace_dir = std::move(source.value().workspace_dir);
    request.files = std::move(source.value().files);
    auto outcome = profiler_.profile(request, [this](const std::string& line) { session_.log.info(line); });
    if (!outcome) return RecordEdit::error(outcome.status().message());
    session_.log.info(cudaagent::quoted(request.id) + ": " + std::string(verdict_name(outcome.value().verdict)) +
                      " (" + outcome.value().reason + ")");
    return RecordEdit::set_key(std::move(outcome.value().json));
  }

 private:
  Profiler& profiler_;
  Session& session_;
};

Result<StageEnd> run_workspaces(ProfileOptions& options, Profiler& profiler, Session& session) {
  auto sink = RecordSink::open(options.common.output);
  if (!sink) return sink.status();
  std::string task_bytes;
  if (!options.task.empty() && !read_whole_file(options.task, task_bytes)) {
    return Status::error("cannot read --task '" + options.task + "'");
  }
  for (const std::string& dir : options.common.inputs) {
    if (session.stop_signal.load() != 0) break;
    auto input = workspace_input(dir, options.task, task_bytes);
    if (!input) return input.status();
    ProfileRequest request;
    request.workspace_dir = input.value().workspace_dir;
    request.id = input.value().id;
    request.model_py = std::move(input.value().model_py);
    const std::string task_source = input.value().task_source;
    auto outcome = profiler.profile(request, [&](const std::string& line) { session.log.info(line); });
    std::string line;
    if (!outcome) {
      append_error_record(line, {"profile", dir, 0}, outcome.status().message(), "", request.id);
    } else if (options.brief) {
      simdjson::dom::parser parser;
      simdjson::dom::element value;
      line = request.id + "\n";
      if (!parser.parse(outcome.value().json).get(value)) line += brief_text(value);
    } else {
      session.log.info(cudaagent::quoted(dir) + ": " + std::string(verdict_name(outcome.value().verdict)) +
                       " (" + outcome.value().reason + ")");
      JsonWriter json(line);
      json.begin_object().field("id", request.id).field("workspace", request.workspace_dir);
      json.field("task_source", task_source).key("profile").raw(outcome.value().json).end_object();
      line.push_back('\n');
    }
    for (Status status : {sink.value().write(line), sink.value().flush()}) {
      if (!status) return sink.value().pipe_closed() ? Result<StageEnd>(StageEnd::kPipeClosed) : Result<StageEnd>(status);
    }
  }
  if (auto status = sink.value().commit(); !status) return status;
  return StageEnd::kCompleted;
}

}  // namespace

void add_profile_flags(CLI::App& app, ProfileOptions& options) {
  add_common_flags(app, options.common);
  ProfileSettings& s = options.settings;
  app.add_option("--task", options.task, "Pristine model.py for workspace inputs (default: the "
                 "workspace's own, which the candidate could have edited)")->type_name("FILE");
  app.add_option("--device", s.device, "cuda, or cpu (no L2 flush)")
      ->capture_default_str()->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--compile-mode", s.compile_mode, "torch.compile mode of the compile baseline, or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs", "none"}));
  app.add_option("--rounds", s.rounds, "Alternating rounds per arm")->capture_default_str()
      ->check(CLI::Range(2, 10000));
  app.add_option("--round-ms", s.round_ms, "Timed work per round and arm (sets the calls per round)")
      ->capture_default_str()->check(CLI::Range(0.01, 60000.0));
  app.add_option("--max-calls", s.max_calls, "Most timed calls per round and arm")->capture_default_str()
      ->check(CLI::Range(2, 100000));
  app.add_option("--warmup-ms", s.warmup_ms, "Warm-up per arm before the first round, ms")
      ->capture_default_str()->check(CLI::Range(0.0, 600000.0));
  app.add_option("--atol", s.atol, "Absolute tolerance of every call's check (as verify's)")->capture_default_str();
  app.add_option("--rtol", s.rtol, "Relative tolerance of every call's check")->capture_default_str();
  app.add_option("--max-speedup", s.flags.max_speedup, "Speedup over eager above which the result "
                 "is flagged (FLAG_HACK)")->capture_default_str()->check(CLI::Range(1.0001, 1e9));
  app.add_option("--bandwidth-gbs", s.bandwidth_gbs, "Memory bandwidth of the roofline floor in GB/s "
                 "(0: no roofline gate)")->capture_default_str()->check(CLI::Range(0.0, 1e6));
  app.add_flag("--fresh-baselines", s.fresh_baselines, "Measure the baselines even when the store has them");
  app.add_flag("--brief", options.brief, "Print a few plain lines per workspace (times, speedups, "
               "flags, what to look at) instead of records");
  app.add_option("--python", s.python, "Interpreter with torch (default: the first python3 that "
                 "imports torch; or $CUDAAGENT_PYTHON)")->type_name("PATH");
  app.add_option("--arch", s.build.cuda_arch, "CUDA architecture, e.g. 90 (default: the GPU's)");
  app.add_option("--cache-dir", s.cache_dir, "Build objects, discovery cache and device locks "
                 "(default: $CUDAAGENT_CACHE_DIR or ~/.cache/cudaagent)")->type_name("DIR");
  app.add_option("--timeout", s.call_timeout_seconds, "Seconds one call may take")
      ->capture_default_str();
  app.add_option("--load-timeout", s.load_timeout_seconds, "Seconds loading the task or the "
                 "candidate, or torch.compile's first call, may take")->capture_default_str();
  app.add_option("--lock-timeout", s.lock_timeout_seconds, "Seconds to wait for the device lock")
      ->capture_default_str();
  app.add_option("--bwrap", options.sandbox.bwrap, "The bubblewrap program")->capture_default_str();
  app.add_flag("--allow-unsandboxed", options.sandbox.allow_unsandboxed, "Run untrusted code even "
               "when the OS sandbox is below the minimum (never for rewards)");
  app.add_flag("--no-sandbox", options.sandbox.no_sandbox, "Do not use the OS sandbox at all (needs "
               "--allow-unsandboxed)");
  app.add_option("--candidate-user", options.candidate_user, "User the candidate's code runs as: "
                 "auto (nobody when run as root in the sandbox: the process limit does not bind "
                 "root), none, or UID[:GID]")->capture_default_str();
  app.add_flag("--keep-job-dirs", s.keep_job_dirs, "Keep each job's directories");
}

Result<StageEnd> run_profile(ProfileOptions& options, Session& session) {
  auto workspaces = inputs_are_workspaces(options.common.inputs);
  if (!workspaces) return workspaces.status();
  if (options.brief && !workspaces.value()) return Status::error("--brief takes workspace directories");
  options.settings.build.jobs = options.common.jobs;
  auto torch = find_torch(options.settings.python,
                          options.settings.cache_dir.empty() ? cache_dir() : options.settings.cache_dir);
  if (!torch) return torch.status();
  if (auto status = make_sandbox_hook(options.sandbox, torch.value(), options.settings.device, session,
                                      options.settings.sandbox, options.settings.sandbox_summary);
      !status) {
    return status;
  }
  auto user = resolve_candidate_user(options.candidate_user, static_cast<bool>(options.settings.sandbox));
  if (!user) return Status::error("--candidate-user: " + user.status().message());
  options.settings.candidate_user = user.value();
  options.settings.stop = &session.stop_signal;
  auto profiler = Profiler::create(options.settings);
  if (!profiler) return profiler.status();
  std::optional<ResultStore> store;
  if (!options.common.db.empty()) {
    auto opened = ResultStore::open(options.common.db);
    if (!opened) return opened.status();
    store.emplace(std::move(opened).value());
    profiler.value().use_store(&*store);
  }
  session.log.info("torch " + profiler.value().torch().torch_version + " (" + profiler.value().torch().python +
                   "), sandbox: " + options.settings.sandbox_summary);
  if (workspaces.value()) return run_workspaces(options, profiler.value(), session);
  ProfileStage stage(profiler.value(), session);
  return run_record_stage(stage, options.common, session);
}

}  // namespace cudaagent
