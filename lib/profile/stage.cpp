// The profile tool's plumbing: flags, the sandbox (as verify's), the store, and the two input
// modes. The measurement itself is lib/profile/profile.cpp.
#include "cudaagent/candidate/build_flags.h"
#include "cudaagent/profile/stage.h"

#include <filesystem>
#include <optional>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/terminal_text.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/base/version.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/candidate/candidate_record.h"
#include "cudaagent/candidate/workspace_input.h"
#include "cudaagent/profile/report.h"
#include "cudaagent/records/record.h"
#include "cudaagent/records/record_sink.h"
#include "cudaagent/records/record_stage.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/sandbox/runner.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

// Bump when what a stored profile means changes, so older stored profiles are not reused
// (2: measured in the task's evaluation session, beside the null model; 3: model_new.py's static
// policy applied, as verify's).
constexpr int kStoredProfileRules = 3;

// Whether a stop request may have cut a profile short: any profile that returns once a stop was
// requested, whatever it says (a timing session killed mid-round is not a measurement). Such a
// record is neither written nor stored; a re-run times it again.
bool cut_short(const Result<ProfileOutcome>& outcome, const Session& session) {
  (void)outcome;
  return session.stop_signal.load() != 0;
}

// The store key of a candidate's profile: the baseline key (task, device, GPU, torch, harness and
// the baselines' settings), the candidate's files by content, and every setting that changes the
// candidate's measurement or its gates. "" when the candidate cannot be read (nothing is stored).
std::string profile_key(const Profiler& profiler, const ProfileRequest& request) {
  auto snapshot = request.workspace_dir.empty()
                      ? snapshot_from_files(request.files, SnapshotLimits{}, ProtectedFiles{})
                      : snapshot_workspace(request.workspace_dir, SnapshotLimits{}, ProtectedFiles{});
  if (!snapshot) return {};
  const ProfileSettings& s = profiler.settings();
  std::string material;
  JsonWriter key(material);
  key.begin_object().field("stage", "profile").field("rules", kStoredProfileRules);
  key.field("cudaagent", build_version()).field("baselines", profiler.baseline_key(request.model_py));
  key.field("candidate", snapshot.value().content_hash).field("arch", s.build.cuda_arch);
  key.field("atol", s.atol).field("rtol", s.rtol);
  key.field("max_speedup", s.flags.max_speedup).field("bandwidth_gbs", s.bandwidth_gbs);
  key.field("roofline_slack", s.flags.roofline_slack).field("audit_fraction", s.audit_fraction);
  key.field("call_timeout", s.call_timeout_seconds).field("bootstrap_resamples", s.bootstrap.resamples);
  key.field("candidate_user", s.candidate_user.has_value());
  // The C++ is what a CPU profile times; 2, the default, keeps the keys stores already hold.
  if (s.build.host_optimization != 2) key.field("host_opt", s.build.host_optimization);
  key.field("kernel_trace", s.device == "cuda" ? s.kernel_trace : "off").field("kernel_provenance", s.kernel_provenance);
  // Its script is outside the harness hash; "off" keeps a profile made without it from being
  // reused with it on.
  key.field("python_policy", profiler.static_policy().key()).end_object();
  return sha256_hex(material);
}

// JSONL mode: the records cudaagent-verify writes ({"id", "task": {"model_py"}, "candidate":
// {"files"} | {"workspace"}, "verify": {"verdict"}}); only PASS is timed. With --db a profile is
// kept in the store under profile_key() (committed before its record is released), and a re-run
// of the same candidate, task and settings takes it, marked "store": {"hit": true}, instead of
// timing again (--remeasure times anyway). INFRA_ERROR is never stored.
class ProfileStage final : public RecordStage {
 public:
  ProfileStage(Profiler& profiler, ResultStore* store, bool remeasure, Session& session)
      : profiler_(profiler), store_(store), remeasure_(remeasure), session_(session) {}
  std::string_view key() const override { return "profile"; }
  bool slow_records() const override { return true; }  // a sandboxed run per record

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
    std::string job_key;
    if (store_ != nullptr) {
      job_key = profile_key(profiler_, request);
      if (!job_key.empty() && !remeasure_) {
        auto stored = store_->find(job_key);
        if (!stored) return RecordEdit::error("store: " + stored.status().message());
        if (stored.value()) {
          std::string value;
          if (!append_with_member(value, *stored.value(), "store", "{\"hit\":true}", false)) {
            return RecordEdit::error("the store holds a malformed profile under " + job_key);
          }
          session_.log.info(cudaagent::quoted(request.id) + ": profile from the store (" +
                            job_key.substr(0, 12) + ")");
          return RecordEdit::set_key(std::move(value));
        }
      }
    }
    auto outcome = profiler_.profile(request, [this](const std::string& line) { session_.log.info(line); });
    if (cut_short(outcome, session_)) return RecordEdit::interrupted();
    if (!outcome) return RecordEdit::error(outcome.status().message());
    session_.log.info(cudaagent::quoted(request.id) + ": " + std::string(verdict_name(outcome.value().verdict)) +
                      " (" + outcome.value().reason + ")");
    if (!job_key.empty() && outcome.value().verdict != Verdict::kInfraError) {
      pending_.push_back(StoredResult{job_key, "profile", request.id, outcome.value().json});
    }
    return RecordEdit::set_key(std::move(outcome.value().json));
  }

  // Stored profiles are durable before their records go downstream (cudaagent(7), STORES).
  Status before_release() override {
    if (store_ == nullptr || pending_.empty()) return Status::ok();
    auto put = store_->put_batch(pending_);
    pending_.clear();
    return put.status();
  }

 private:
  Profiler& profiler_;
  ResultStore* store_;
  bool remeasure_;
  Session& session_;
  std::vector<StoredResult> pending_;
};

Result<StageEnd> run_workspaces(ProfileOptions& options, Profiler& profiler, Session& session) {
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
    ProfileRequest request;
    request.workspace_dir = input.value().workspace_dir;
    request.id = input.value().id;
    request.model_py = std::move(input.value().model_py);
    const std::string task_source = input.value().task_source;
    auto outcome = profiler.profile(request, [&](const std::string& line) { session.log.info(line); });
    if (cut_short(outcome, session)) break;
    std::string line;
    if (!outcome) {
      append_error_record(line, {"profile", dir, 0}, outcome.status().message(), "", request.id);
    } else if (options.brief) {
      simdjson::dom::parser parser;
      simdjson::dom::element value;
      line = printable_text(request.id, 1024) + "\n";  // the workspace's name: anyone's bytes
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
  return finish_sink(sink.value(), session);
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
  app.add_option("--call-wait", s.call_wait, "How the session's processes wait for a call's "
                 "messages: spin (microsecond wake-ups, a busy core each), block, or auto (spin "
                 "on a GPU)")->capture_default_str()->check(CLI::IsMember({"auto", "spin", "block"}));
  app.add_flag("--call-diagnostics", s.call_diagnostics, "Record where the timed calls' time goes "
               "(call_cost.phases_ms: the messages, the forward on the host and between CUDA events, "
               "the outputs), per model");
  app.add_option("--forwards-per-call", s.forwards_per_call, "Forwards per call, each on fresh "
                 "inputs and each judged; one sample per call, its time over them (above 1 for "
                 "trusted code: a first forward could compute the later slots)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--forward-sync", s.forward_sync, "When the candidate's process waits for the device in a "
                 "call: each (after every forward and its copy), call (once, after the last output "
                 "is copied in the current stream's order; work a candidate leaves running past the window "
                 "is caught only by the kernel trace, and several forwards per call are for trusted code) "
                 "or auto (call on cuda with one forward per call and the kernel trace on, else each)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "each", "call"}));
  app.add_option("--call-timer", s.call_timer, "What times a call: gpu (CUDA events on the owner's "
                 "stream, ordered against the candidate's by flags the GPU writes; no messages in "
                 "the window), host (the owner's clock around the messages) or auto (gpu on cuda, "
                 "host on the CPU)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "host", "gpu"}));
  app.add_option("--call-lead-us", s.call_lead_us, "With --call-timer gpu: a pause on the owner's "
                 "stream before each call's window opens, so the candidate's launches are queued "
                 "by then (0: none; default: 600 with the GPU timer and --forward-sync call, else 0)")
      ->check(CLI::Range(0.0, 10000.0));
  app.add_flag("--cpu-groups", s.cpu_groups, "Run the session's owner and its two runners each on "
               "a group of whole cores of its own (of the CPUs this process may use), so the "
               "scheduler never puts two of them on one core");
  app.add_option("--rounds", s.rounds, "Alternating rounds per arm, the least with adaptive rounds "
                 "(default: 6 on cuda, 10 on cpu)")->check(CLI::Range(2, 10000));
  app.add_option("--max-rounds", s.max_rounds, "Adaptive rounds: go on after --rounds until the "
                 "interval is as tight as --target-ci asks, for at most this many rounds (0: --rounds; "
                 "default: 10 on cuda unless --rounds is given, else 0)")->check(CLI::Range(0, 10000));
  app.add_option("--target-ci", s.target_ci, "Adaptive rounds: stop once the 95% interval's "
                 "half-width is at most this fraction of its median (0: fixed rounds; default: 0.01 "
                 "on cuda when --max-rounds exceeds --rounds, else 0)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--rounds-seconds", s.rounds_seconds, "Adaptive rounds: stop once the rounds "
                 "have taken this many seconds, after --rounds, met target or not (0: no limit)")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
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
  app.add_flag("--remeasure", options.remeasure, "Time candidates even when the store has their "
               "profile (it is replaced only if absent: the store keeps the first)");
  app.add_flag("--brief", options.brief, "Print a few plain lines per workspace (times, speedups, "
               "flags, what to look at) instead of records");
  app.add_option("--python", s.python, "Interpreter with torch (default: the first python3 that "
                 "imports torch; or $CUDAAGENT_PYTHON)")->type_name("PATH");
  app.add_option("--arch", s.build.cuda_arch, "CUDA architecture, e.g. 90 (default: the GPU's)");
  add_build_limit_flags(app, s.build.limits);
  add_build_host_opt_flag(app, s.build.host_optimization);
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
  app.add_option("--kernel-trace", s.kernel_trace, "The CUPTI kernel trace of the candidate's calls "
                 "(CUDA): on (torch's kernels, GPU work outside the calls and a trace that cannot vouch for "
                 "them withhold the reward), or off")
      ->capture_default_str()->check(CLI::IsMember({"on", "off"}));
  app.add_option("--kernel-trace-library", s.kernel_trace_library, "The injection library (default: "
                 "libcudaagent_cupti.so installed beside the programs)")->type_name("PATH");
  app.add_option("--baseline-trace", s.baseline_trace, "Start the baselines' runner with the kernel "
                 "trace too (its trace is not read), so the tracer's cost per launch falls on both arms "
                 "of the speedup: on, or off (the candidate's alone)")
      ->capture_default_str()->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--kernel-provenance", s.kernel_provenance, "Record which shared object launched each "
               "kernel (a stack walk per launch, a few us that count against the candidate) and "
               "decide the fallback gate by it instead of by kernel names");
  app.add_flag("--keep-job-dirs", s.keep_job_dirs, "Keep each job's directories");
  app.add_flag("--no-python-policy", options.no_python_policy, "Skip the static check of "
               "model_new.py, to test the timing beneath it (never for rewards)");
}

Result<StageEnd> run_profile(ProfileOptions& options, Session& session) {
  auto workspaces = inputs_are_workspaces(options.common.inputs);
  if (!workspaces) return workspaces.status();
  if (options.brief && !workspaces.value()) return Status::error("--brief takes workspace directories");
  if (auto status = resolve_rounds(options.settings); !status) return status;
  options.settings.build.jobs = options.common.jobs;
  options.settings.python_policy = !options.no_python_policy;
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
  // A stop request reaches every wait of the evaluation session (settings.stop) and, through the
  // sandbox hook, every sandboxed process of a profile (its workers, the compilers): they end within
  // a fraction of a second of it; a profile the stop cut short is not written or stored.
  options.settings.stop = &session.stop_signal;
  options.settings.sandbox = honour_stop(std::move(options.settings.sandbox), &session.stop_signal);
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
  ProfileStage stage(profiler.value(), store ? &*store : nullptr, options.remeasure, session);
  return run_record_stage(stage, options.common, session);
}

}  // namespace cudaagent
