// The rollout tool's plumbing: flags, reading tasks, the evaluator and the two sandboxes (the
// evaluator's, with the GPU; the agent's shell, without), the store and the output. The episode
// workers are episode_runner.cpp, the loop itself episode.cpp.
#include "cudaagent/rollout/rollout_stage.h"

#include <CLI/CLI.hpp>
#include <simdjson.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "cudaagent/base/files.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/candidate/build_flags.h"
#include "cudaagent/records/line_reader.h"
#include "cudaagent/records/record.h"
#include "cudaagent/records/record_sink.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/sandbox/process.h"
#include "cudaagent/sandbox/runner.h"
#include "episode_runner.h"

namespace cudaagent::rollout {
namespace {

namespace fs = std::filesystem;

struct TaskInput {
  std::string id, model_py, record_json, source;
  std::uint64_t line = 0;
};

// A KernelBench-style task file: its bytes become the task; the id is their hash.
TaskInput task_from_python(const std::string& path, const std::string& model_py) {
  TaskInput task;
  task.id = sha256_hex(model_py);
  task.model_py = model_py;
  task.source = path;
  JsonWriter w(task.record_json);
  w.begin_object().field("id", task.id).key("task").begin_object().field("source", "file");
  w.field("path", path).field("model_py", model_py).end_object().end_object();
  return task;
}

// Reads every task of this shard; malformed lines become error records in `errors`.
Status read_tasks(const CommonOptions& common, const std::atomic<int>& stop, std::vector<TaskInput>& tasks,
                  std::string& errors, std::uint64_t& bad_lines) {
  std::vector<std::string> inputs = common.inputs;
  if (inputs.empty()) inputs.push_back("-");
  std::uint64_t ordinal = 0;
  RecordParser parser;
  for (const std::string& input : inputs) {
    if (input.size() > 3 && input.compare(input.size() - 3, 3, ".py") == 0) {
      std::string bytes;
      if (!read_whole_file(input, bytes)) return Status::error("cannot read '" + input + "'");
      if (common.shard.owns(ordinal++)) tasks.push_back(task_from_python(input, bytes));
      continue;
    }
    auto reader = LineReader::open(input, common.max_record_bytes, &stop);
    if (!reader) return reader.status();
    InputLine line;
    for (;;) {
      auto more = reader.value().next(line);
      if (!more) return more.status();
      if (!more.value()) break;
      if (line.bytes.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      if (!common.shard.owns(ordinal++)) continue;
      const ErrorContext where{"rollout", input, line.number};
      if (line.oversized) {
        append_error_record(errors, where, "line longer than --max-record-bytes", line.bytes);
        ++bad_lines;
        continue;
      }
      auto object = parser.parse(line.bytes);
      std::string_view model_py, id;
      if (!object) {
        append_error_record(errors, where, object.status().message(), line.bytes);
        ++bad_lines;
        continue;
      }
      if (object.value()["task"]["model_py"].get(model_py)) {
        append_error_record(errors, where,
                            "record has no task.model_py (a task record of synth/filter/dedup)", line.bytes);
        ++bad_lines;
        continue;
      }
      TaskInput task;
      task.model_py = std::string(model_py);
      task.id = object.value()["id"].get(id) ? sha256_hex(task.model_py) : std::string(id);
      task.record_json = std::string(line.bytes);
      task.source = input;
      task.line = line.number;
      tasks.push_back(std::move(task));
    }
  }
  return Status::ok();
}

// The members of --extra-body's object, without the braces, for ChatRequest::extra_members.
Result<std::string> extra_members(const std::string& json) {
  if (json.empty()) return std::string();
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(json).get(object)) return Status::error("--extra-body must be a JSON object");
  const std::string minified = simdjson::minify(object);
  return minified.size() <= 2 ? std::string() : minified.substr(1, minified.size() - 2);
}

}  // namespace

// One option after another, as --help lists them: a table, kept in one place so that it reads as
// the help does.
void add_rollout_flags(CLI::App& app, RolloutOptions& o) {
  add_common_flags(app, o.common);
  EpisodeSettings& e = o.episode;
  app.add_option("--endpoint", o.endpoint,
                 "OpenAI-compatible server: base URL or the full "
                 ".../v1/chat/completions URL")
      ->type_name("URL");
  app.add_option("--model", e.model, "Model name sent to the server")->type_name("NAME");
  app.add_option("--api-key-env", o.api_key_env, "Environment variable holding the server's API key")
      ->type_name("VAR");
  app.add_option("--policy", o.policy,
                 "server (the endpoint's model), or replay:FILE (scripted replies, "
                 "one JSON object per line)")
      ->capture_default_str();
  app.add_option("--device", o.device, "cuda, or cpu for CPU tasks whose kernels are plain C++")
      ->capture_default_str()
      ->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--episodes-per-task", o.episodes_per_task,
                 "Episodes of each task (samples for "
                 "group-relative methods)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--max-turns", e.max_turns, "Model replies per episode, at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--max-context-tokens", e.max_context_tokens, "Prompt plus reply tokens, at most")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{256}, std::int64_t{1} << 30));
  app.add_option("--max-seconds", e.max_seconds,
                 "Wall time of one episode's loop (the final score not "
                 "counted)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e7));
  app.add_option("--max-evaluations", e.max_evaluations, "compile/verify/profile requests per episode")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--temperature", e.sampling.temperature, "Sampling temperature")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  app.add_option("--top-p", e.sampling.top_p, "Nucleus sampling")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--top-k", e.sampling.top_k, "Top-k sampling (vLLM; -1 off)");
  app.add_option("--min-p", e.sampling.min_p, "Min-p sampling (vLLM)");
  app.add_option("--max-tokens", e.sampling.max_tokens, "Tokens per reply, at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--seed", e.sampling.seed, "Sampling seed; each episode sends its own seed derived from it");
  app.add_option("--tool-protocol", e.tool_protocol,
                 "native (tools in the request, calls in tool_calls) "
                 "or text (<tool_call> JSON in the text, for servers without tool parsing)")
      ->capture_default_str()
      ->check(CLI::IsMember({"native", "text"}));
  app.add_flag("--no-token-ids", o.no_token_ids,
               "Do not ask for token ids and log-probs (servers that "
               "reject vLLM's fields are detected anyway)");
  app.add_option("--prompt-mode", o.prompt_mode,
                 "messages (every turn as chat messages), or ids (vLLM: later turns as the exact token ids "
                 "of the conversation so far, through /tokenize and /v1/completions)")
      ->capture_default_str()
      ->check(CLI::IsMember({"messages", "ids"}));
  app.add_option("--token-encoding", o.token_encoding,
                 "Token arrays in records: base64 (little-endian "
                 "32-bit words) or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"base64", "json"}));
  app.add_option("--extra-body", o.extra_body,
                 "JSON object merged into every request, e.g. "
                 "'{\"chat_template_kwargs\":{\"enable_thinking\":false}}'")
      ->type_name("JSON");
  app.add_option("--request-timeout", o.request_timeout, "Seconds one model request may take")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1e6));
  app.add_option("--retries", o.retries, "Retries of a failed request (HTTP 408/429/5xx, no answer)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  app.add_option("--backoff", o.backoff, "Seconds before the first retry; doubles each time")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--command-timeout", e.command_timeout_seconds,
                 "Default seconds of one Bash command "
                 "(the model may ask for up to --max-command-timeout)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--max-command-timeout", e.max_command_timeout_seconds, "Longest a Bash command may run")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--eval-slots", o.evaluator.slots, "Evaluations at once (one per GPU of the process)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--build-slots", o.evaluator.build_slots, "compile requests at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--work-dir", e.work_dir, "Where each episode's private folder is made")
      ->capture_default_str()
      ->type_name("DIR");
  app.add_flag("--keep-workspaces", e.keep_workspaces,
               "Keep each episode's folder (its path is in the record)");
  app.add_option("--skill", o.skill_path, "The skill document (default: share/skill/SKILL.md)")
      ->type_name("FILE");
  app.add_option("--python", o.python,
                 "Interpreter with torch (default: the first python3 that imports "
                 "torch; or $CUDAAGENT_PYTHON)")
      ->type_name("PATH");
  app.add_option("--cache-dir", o.cache_dir,
                 "Build objects and discovery cache (default: "
                 "$CUDAAGENT_CACHE_DIR or ~/.cache/cudaagent)")
      ->type_name("DIR");
  app.add_option("--arch", o.arch, "CUDA architecture, e.g. 90 (default: the GPU's)");
  add_build_host_opt_flag(app, o.evaluator.verify.build.host_optimization);
  app.add_option("--bwrap", o.sandbox.bwrap, "The bubblewrap program")->capture_default_str();
  app.add_flag("--allow-unsandboxed", o.sandbox.allow_unsandboxed,
               "Run untrusted code even when the OS "
               "sandbox is below the minimum (never for rewards)");
  app.add_flag("--no-sandbox", o.sandbox.no_sandbox,
               "Do not use the OS sandbox at all (needs "
               "--allow-unsandboxed)");
  app.add_option("--candidate-user", o.candidate_user, "User the candidate's code runs as in verify and "
                 "profile: auto (nobody when run as root in the sandbox), none, or UID[:GID]")
      ->capture_default_str();
  app.callback([&app, &o] {
    // --version (added by run_tool) needs no policy.
    if (const CLI::Option* version = app.get_option_no_throw("--version");
        version != nullptr && version->count() > 0) {
      return;
    }
    const bool replay = o.policy.rfind("replay:", 0) == 0;
    if (!replay && o.policy != "server") {
      throw CLI::ValidationError("--policy", "is server or replay:FILE, not '" + o.policy + "'");
    }
    if (!replay && (o.endpoint.empty() || o.episode.model.empty())) {
      throw CLI::ValidationError("--endpoint", "the server policy needs --endpoint and --model");
    }
  });
}

namespace {

// The model side: a replay script, or the server's endpoint with its key and retries.
struct PolicySource {
  bool replay = false;
  std::shared_ptr<const ReplayScript> script;
  llm::ChatEndpoint endpoint;
};

Result<PolicySource> policy_source(const RolloutOptions& o) {
  PolicySource source;
  source.replay = o.policy.rfind("replay:", 0) == 0;
  if (source.replay) {
    auto loaded = load_replay_script(o.policy.substr(7));
    if (!loaded) return loaded.status();
    source.script = std::make_shared<const ReplayScript>(std::move(loaded).value());
  }
  source.endpoint.url = o.endpoint;
  source.endpoint.timeout_seconds = o.request_timeout;
  source.endpoint.retry = RetryPolicy{o.retries, o.backoff, 30.0};
  if (!o.api_key_env.empty()) {
    const char* key = std::getenv(o.api_key_env.c_str());
    if (key == nullptr) return Status::error("environment variable " + o.api_key_env + " (--api-key-env) is not set");
    source.endpoint.api_key = key;
  }
  return source;
}

// The episode settings that follow from the flags: the request's extra members, token ids, the
// policy's name, the work folder and the skill document.
Status configure_episode(RolloutOptions& o, bool replay) {
  EpisodeSettings& e = o.episode;
  auto members = extra_members(o.extra_body);
  if (!members) return members.status();
  e.extra_members = members.value();
  e.tokens = o.no_token_ids ? llm::TokenOptions{false, false} : llm::TokenOptions{};
  e.token_prompts = o.prompt_mode == "ids";
  if (e.token_prompts && (replay || o.no_token_ids)) {
    return Status::error("--prompt-mode ids needs a server and its token ids (not --no-token-ids, not a replay)");
  }
  e.base64_tokens = o.token_encoding == "base64";
  e.policy_name = replay ? "replay:" + fs::path(o.policy.substr(7)).filename().string() : "server";
  e.endpoint = replay ? "" : llm::chat_completions_url(o.endpoint);
  e.work_dir = fs::absolute(e.work_dir).string();
  const std::string skill_path = o.skill_path.empty() ? share_dir() + "/skill/SKILL.md" : o.skill_path;
  if (!read_whole_file(skill_path, e.skill_text)) return Status::error("cannot read the skill document '" + skill_path + "'");
  return Status::ok();
}

// The evaluator behind the workspace's shims (verify and profile, with the GPU), set as
// cudaagent-verify and cudaagent-profile set theirs, so an episode's verify and profile values are
// what those tools would write for the same workspace.
Result<std::unique_ptr<LocalEvaluator>> make_evaluator(RolloutOptions& o, const TorchEnv& torch, Session& session) {
  LocalEvaluatorSettings& ev = o.evaluator;
  ev.verify.device = ev.profile.device = o.device;
  ev.verify.python = ev.profile.python = o.python;
  ev.verify.cache_dir = ev.profile.cache_dir = o.cache_dir;
  ev.verify.build.cuda_arch = ev.profile.build.cuda_arch = o.arch;
  ev.profile.build.host_optimization = ev.verify.build.host_optimization;
  if (auto status = make_sandbox_hook(o.sandbox, torch, o.device, session, ev.verify.sandbox, ev.verify.sandbox_summary);
      !status) {
    return status;
  }
  ev.profile.sandbox = ev.verify.sandbox;
  ev.profile.sandbox_summary = ev.verify.sandbox_summary;
  auto user = resolve_candidate_user(o.candidate_user, static_cast<bool>(ev.verify.sandbox));
  if (!user) return Status::error("--candidate-user: " + user.status().message());
  ev.verify.candidate_user = ev.profile.candidate_user = user.value();
  ev.verify.stop = ev.profile.stop = &session.stop_signal;
  return LocalEvaluator::create(ev);
}

// The agent's own shell: a sandbox without the GPU, torch readable, limits on files.
Status configure_shell(RolloutOptions& o, const TorchEnv& torch, Session& session) {
  SandboxRequest request;
  request.bwrap = o.sandbox.bwrap;
  request.allow_unsandboxed = o.sandbox.allow_unsandboxed;
  request.no_sandbox = o.sandbox.no_sandbox;
  request.read_only = torch_runtime_paths(torch);
  auto sandbox = choose_sandbox(request, session.log);
  if (!sandbox) return sandbox.status();
  EpisodeSettings& e = o.episode;
  e.sandbox = sandbox.value().wrap;
  e.sandbox_summary = sandbox.value().summary;
  e.shell_path = fs::path(torch.python).parent_path().string() + ":/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin";
  e.shell_limits.file_size_bytes = std::uint64_t{1} << 30;
  e.shell_limits.open_files = 4096;
  return Status::ok();
}

// Every episode of every task: --episodes-per-task samples each, with their ids.
std::vector<PlannedEpisode> plan_episodes(const std::vector<TaskInput>& tasks, const RolloutOptions& o) {
  std::vector<PlannedEpisode> planned;
  for (const TaskInput& input : tasks) {
    for (int sample = 0; sample < o.episodes_per_task; ++sample) {
      PlannedEpisode p;
      p.task.task_id = input.id;
      p.task.model_py = input.model_py;
      p.task.record_json = input.record_json;
      p.task.source = input.source;
      p.task.sample = sample;
      p.task.episode_id = episode_id(input.id, input.model_py, sample, o.episode);
      p.line = input.line;
      planned.push_back(std::move(p));
    }
  }
  return planned;
}

// The episodes the store does not hold yet; those it holds are written to the output at once.
Result<std::vector<PlannedEpisode>> not_in_store(std::vector<PlannedEpisode> planned, ResultStore* store,
                                                 RecordSink& output, std::size_t& from_store) {
  std::vector<PlannedEpisode> todo;
  for (PlannedEpisode& p : planned) {
    if (store != nullptr) {
      auto found = store->find(p.task.episode_id);
      if (!found) return found.status();
      if (found.value()) {
        if (auto s = output.write(*found.value() + "\n"); !s) return s;
        ++from_store;
        continue;
      }
    }
    todo.push_back(std::move(p));
  }
  return todo;
}

}  // namespace

Result<StageEnd> run_rollout(RolloutOptions& o, Session& session) {
  (void)become_child_subreaper();
  auto source = policy_source(o);
  if (!source) return source.status();
  if (Status configured = configure_episode(o, source.value().replay); !configured) return configured;

  // Tasks first: a usage problem in the input shows before anything starts.
  std::vector<TaskInput> tasks;
  std::string error_records;
  std::uint64_t bad_lines = 0;
  if (auto read = read_tasks(o.common, session.stop_signal, tasks, error_records, bad_lines); !read) return read;
  if (o.common.max_bad_lines >= 0 && bad_lines > static_cast<std::uint64_t>(o.common.max_bad_lines)) {
    return Status::error(std::to_string(bad_lines) + " malformed input lines, more than --max-bad-lines");
  }

  // The evaluator (verify, profile: the GPU) and the agent's shell (no GPU).
  auto torch = find_torch_for_device(o.python, o.cache_dir.empty() ? cache_dir() : o.cache_dir, o.device);
  if (!torch) return torch.status();
  auto evaluator = make_evaluator(o, torch.value(), session);
  if (!evaluator) return evaluator.status();
  if (Status shell = configure_shell(o, torch.value(), session); !shell) return shell;

  // The outputs, and the episodes the store already holds.
  auto sink = RecordSink::open(o.common.output);
  if (!sink) return sink.status();
  std::optional<RecordSink> error_sink;
  if (!o.common.errors.empty()) {
    auto opened = RecordSink::open(o.common.errors);
    if (!opened) return opened.status();
    error_sink.emplace(std::move(opened).value());
  }
  RecordSink& errors_out = error_sink ? *error_sink : sink.value();
  if (auto s = errors_out.write(error_records); !s) return s;
  std::optional<ResultStore> store;
  if (!o.common.db.empty()) {
    auto opened = ResultStore::open(o.common.db);
    if (!opened) return opened.status();
    store.emplace(std::move(opened).value());
  }
  const std::vector<PlannedEpisode> planned = plan_episodes(tasks, o);
  std::size_t from_store = 0;
  auto todo = not_in_store(planned, store ? &*store : nullptr, sink.value(), from_store);
  if (!todo) return todo.status();
  if (auto s = sink.value().flush(); !s)
    return sink.value().pipe_closed() ? Result<StageEnd>(StageEnd::kPipeClosed) : Result<StageEnd>(s);
  session.log.info(std::to_string(tasks.size()) + " tasks, " + std::to_string(planned.size()) + " episodes (" +
                   std::to_string(from_store) + " already in the store), " + std::to_string(o.common.jobs) +
                   " at once; torch " + torch.value().torch_version + ", sandbox: " + o.episode.sandbox_summary);

  EpisodeRun run;
  run.settings = &o.episode;
  const PolicySource& policy = source.value();
  run.make_policy = [&policy, &session, &o](const std::string& id) -> std::unique_ptr<Policy> {
    if (policy.replay) return std::make_unique<ReplayPolicy>(policy.script);
    return std::make_unique<ServerPolicy>(
        policy.endpoint,
        [&session, id](const std::string& line) { session.log.warn("episode " + id.substr(0, 12) + ": " + line); },
        o.episode.token_prompts);
  };
  run.evaluator = evaluator.value().get();
  run.output = &sink.value();
  run.errors = &errors_out;
  run.store = store ? &*store : nullptr;
  run.jobs = o.common.jobs;
  const EpisodeRunEnd end = run_episodes(todo.value(), run, session);
  if (end.pipe_closed) return StageEnd::kPipeClosed;
  if (!end.failure) return end.failure;
  session.log.info(std::to_string(end.done) + " episodes run, " + std::to_string(end.failed) + " could not run, " +
                   std::to_string(from_store) + " from the store");
  if (error_sink) {
    if (auto s = error_sink->commit(); !s) return s;
  }
  if (auto s = sink.value().commit(); !s) return s;
  return StageEnd::kCompleted;
}

}  // namespace cudaagent::rollout
