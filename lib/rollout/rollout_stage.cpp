// The rollout tool's plumbing: flags, reading tasks, the evaluator and the two sandboxes (the
// evaluator's, with the GPU; the agent's shell, without), the episode workers, the store and the
// output. The loop itself is episode.cpp.
#include "cudaagent/rollout/rollout_stage.h"

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
#include "cudaagent/records/line_reader.h"
#include "cudaagent/records/record.h"
#include "cudaagent/records/record_sink.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/sandbox/process.h"
#include "cudaagent/sandbox/runner.h"

namespace cudaagent::rollout {
namespace {

namespace fs = std::filesystem;

struct TaskInput {
  std::string id, model_py, record_json, source;
  std::uint64_t line = 0;
};

std::string duration_text(double seconds) {
  const long s = static_cast<long>(seconds);
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  return std::to_string(s / 3600) + "h" + std::to_string((s % 3600) / 60) + "m";
}

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

Result<StageEnd> run_rollout(RolloutOptions& o, Session& session) {
  (void)become_child_subreaper();
  EpisodeSettings& e = o.episode;
  const bool replay = o.policy.rfind("replay:", 0) == 0;
  std::shared_ptr<const ReplayScript> script;
  if (replay) {
    auto loaded = load_replay_script(o.policy.substr(7));
    if (!loaded) return loaded.status();
    script = std::make_shared<const ReplayScript>(std::move(loaded).value());
  }
  llm::ChatEndpoint endpoint;
  endpoint.url = o.endpoint;
  endpoint.timeout_seconds = o.request_timeout;
  endpoint.retry = RetryPolicy{o.retries, o.backoff, 30.0};
  if (!o.api_key_env.empty()) {
    const char* key = std::getenv(o.api_key_env.c_str());
    if (key == nullptr)
      return Status::error("environment variable " + o.api_key_env + " (--api-key-env) is not set");
    endpoint.api_key = key;
  }
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
  if (!read_whole_file(skill_path, e.skill_text))
    return Status::error("cannot read the skill document '" + skill_path + "'");

  // Tasks first: a usage problem in the input shows before anything starts.
  std::vector<TaskInput> tasks;
  std::string error_records;
  std::uint64_t bad_lines = 0;
  if (auto read = read_tasks(o.common, session.stop_signal, tasks, error_records, bad_lines); !read)
    return read;
  if (o.common.max_bad_lines >= 0 && bad_lines > static_cast<std::uint64_t>(o.common.max_bad_lines)) {
    return Status::error(std::to_string(bad_lines) + " malformed input lines, more than --max-bad-lines");
  }

  // The evaluator (verify, profile: the GPU) and the agent's shell (no GPU).
  LocalEvaluatorSettings& ev = o.evaluator;
  ev.verify.device = ev.profile.device = o.device;
  ev.verify.python = ev.profile.python = o.python;
  ev.verify.cache_dir = ev.profile.cache_dir = o.cache_dir;
  ev.verify.build.cuda_arch = ev.profile.build.cuda_arch = o.arch;
  auto torch = find_torch_for_device(o.python, o.cache_dir.empty() ? cache_dir() : o.cache_dir, o.device);
  if (!torch) return torch.status();
  if (auto status = make_sandbox_hook(o.sandbox, torch.value(), o.device, session, ev.verify.sandbox,
                                      ev.verify.sandbox_summary);
      !status) {
    return status;
  }
  ev.profile.sandbox = ev.verify.sandbox;
  ev.profile.sandbox_summary = ev.verify.sandbox_summary;
  // The rest as cudaagent-verify and cudaagent-profile set it, so an episode's verify and profile
  // values are what those tools would write for the same workspace.
  auto user = resolve_candidate_user(o.candidate_user, static_cast<bool>(ev.verify.sandbox));
  if (!user) return Status::error("--candidate-user: " + user.status().message());
  ev.verify.candidate_user = ev.profile.candidate_user = user.value();
  ev.verify.stop = ev.profile.stop = &session.stop_signal;
  auto evaluator = LocalEvaluator::create(ev);
  if (!evaluator) return evaluator.status();
  SandboxRequest shell_request;
  shell_request.bwrap = o.sandbox.bwrap;
  shell_request.allow_unsandboxed = o.sandbox.allow_unsandboxed;
  shell_request.no_sandbox = o.sandbox.no_sandbox;
  shell_request.read_only = torch_runtime_paths(torch.value());
  auto shell_sandbox = choose_sandbox(shell_request, session.log);
  if (!shell_sandbox) return shell_sandbox.status();
  e.sandbox = shell_sandbox.value().wrap;
  e.sandbox_summary = shell_sandbox.value().summary;
  e.shell_path = fs::path(torch.value().python).parent_path().string() +
                 ":/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin";
  e.shell_limits.file_size_bytes = std::uint64_t{1} << 30;
  e.shell_limits.open_files = 4096;

  // The episodes, and those the store already holds.
  struct Planned {
    EpisodeTask task;
    std::uint64_t line = 0;
  };
  std::vector<Planned> planned;
  for (const TaskInput& input : tasks) {
    for (int sample = 0; sample < o.episodes_per_task; ++sample) {
      Planned p;
      p.task.task_id = input.id;
      p.task.model_py = input.model_py;
      p.task.record_json = input.record_json;
      p.task.source = input.source;
      p.task.sample = sample;
      p.task.episode_id = episode_id(input.id, input.model_py, sample, e);
      p.line = input.line;
      planned.push_back(std::move(p));
    }
  }
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
  std::vector<Planned> todo;
  std::size_t from_store = 0;
  if (!o.common.db.empty()) {
    auto opened = ResultStore::open(o.common.db);
    if (!opened) return opened.status();
    store.emplace(std::move(opened).value());
  }
  for (Planned& p : planned) {
    if (store) {
      auto found = store->find(p.task.episode_id);
      if (!found) return found.status();
      if (found.value()) {
        if (auto s = sink.value().write(*found.value() + "\n"); !s) return s;
        ++from_store;
        continue;
      }
    }
    todo.push_back(std::move(p));
  }
  if (auto s = sink.value().flush(); !s)
    return sink.value().pipe_closed() ? Result<StageEnd>(StageEnd::kPipeClosed) : Result<StageEnd>(s);
  session.log.info(std::to_string(tasks.size()) + " tasks, " + std::to_string(planned.size()) +
                   " episodes (" + std::to_string(from_store) + " already in the store), " +
                   std::to_string(o.common.jobs) + " at once; torch " + torch.value().torch_version +
                   ", sandbox: " + e.sandbox_summary);

  // The workers: each takes the next episode, runs it, and writes its record.
  std::mutex output_mutex;
  std::atomic<std::size_t> next{0};
  std::size_t done = 0, failed = 0;
  double reward_sum = 0;
  std::size_t rewarded = 0;
  Status failure = Status::ok();
  bool pipe_closed = false;
  const double started = session.clock.now_seconds();
  auto worker = [&] {
    for (;;) {
      if (session.stop_signal.load() != 0) return;
      {
        std::lock_guard<std::mutex> lock(output_mutex);
        if (!failure || pipe_closed) return;
      }
      const std::size_t index = next.fetch_add(1);
      if (index >= todo.size()) return;
      const Planned& p = todo[index];
      std::unique_ptr<Policy> policy;
      if (replay) {
        policy = std::make_unique<ReplayPolicy>(script);
      } else {
        policy = std::make_unique<ServerPolicy>(
            endpoint,
            [&session, id = p.task.episode_id](const std::string& line) {
              session.log.warn("episode " + id.substr(0, 12) + ": " + line);
            },
            e.token_prompts);
      }
      EpisodeSettings settings = e;
      if (e.sampling.seed) {
        settings.sampling.seed =
            (*e.sampling.seed + std::stoll(p.task.episode_id.substr(0, 12), nullptr, 16)) & 0x7fffffff;
      }
      EpisodeResult result;
      try {  // simdjson and the standard library may throw; one episode must not end the run
        result = run_episode(p.task, settings, *policy, *evaluator.value(), session.stop_signal, session.log);
      } catch (const std::exception& error) {
        result = EpisodeResult{};
        result.error = std::string("internal error: ") + error.what();
      }
      std::lock_guard<std::mutex> lock(output_mutex);
      if (!result.finished && result.error.empty()) return;  // stopped: not written, done again on resume
      ++done;
      Status written = Status::ok();
      if (!result.error.empty()) {
        ++failed;
        std::string line;
        append_error_record(line, {"rollout", p.task.source, p.line}, result.error, {}, p.task.episode_id);
        written = errors_out.write(line);
        if (written) written = errors_out.flush();
        session.log.warn("episode " + p.task.episode_id.substr(0, 12) + " could not run: " + result.error);
      } else {
        if (store) {
          const StoredResult row{p.task.episode_id, "rollout", p.task.episode_id,
                                 result.record.substr(0, result.record.size() - 1)};
          if (auto put = store->put_batch(std::span<const StoredResult>(&row, 1)); !put)
            written = put.status();
        }
        if (written) written = sink.value().write(result.record);
        if (written) written = sink.value().flush();
        if (result.reward) {
          reward_sum += *result.reward;
          ++rewarded;
        }
        const double elapsed = session.clock.now_seconds() - started;
        // Episodes finish at the rate seen so far, whatever the parallelism.
        const double eta = elapsed / static_cast<double>(done) * static_cast<double>(todo.size() - done);
        char mean[32];
        std::snprintf(mean, sizeof mean, "%.2f", rewarded ? reward_sum / static_cast<double>(rewarded) : 0.0);
        session.log.info("episode " + std::to_string(done) + "/" + std::to_string(todo.size()) + " (task " +
                         p.task.task_id.substr(0, 12) + ", sample " + std::to_string(p.task.sample) +
                         "): " + result.verdict + ", reward " +
                         (result.reward ? std::to_string(*result.reward).substr(0, 5) : std::string("none")) +
                         ", " + std::to_string(result.turns) + " turns, " + result.finish_reason + ", " +
                         duration_text(result.seconds) + "; mean reward " + mean + "; ETA " +
                         duration_text(eta));
      }
      if (!written) {
        if (sink.value().pipe_closed()) pipe_closed = true;
        if (failure) failure = written;
      }
    }
  };
  std::vector<std::thread> threads;
  const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(std::max(o.common.jobs, 1)),
                                                  std::max<std::size_t>(todo.size(), 1));
  for (std::size_t i = 0; i < count; ++i) threads.emplace_back(worker);
  for (std::thread& thread : threads) thread.join();
  if (pipe_closed) return StageEnd::kPipeClosed;
  if (!failure) return failure;
  session.log.info(std::to_string(done) + " episodes run, " + std::to_string(failed) + " could not run, " +
                   std::to_string(from_store) + " from the store");
  if (error_sink) {
    if (auto s = error_sink->commit(); !s) return s;
  }
  if (auto s = sink.value().commit(); !s) return s;
  return StageEnd::kCompleted;
}

}  // namespace cudaagent::rollout
