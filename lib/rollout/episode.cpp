// The ReAct loop and the record it leaves. Limits are checked before each model request (turns,
// context, wall time, the stop signal); every tool call is answered, malformed ones included; the
// shell is stopped before the final score, so nothing the agent started can change the workspace
// while it is judged.
#include "cudaagent/rollout/episode.h"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/base/version.h"
#include "cudaagent/llm/tool_text.h"
#include "cudaagent/records/record.h"
#include "cudaagent/rollout/eval_server.h"
#include "cudaagent/rollout/shell.h"
#include "cudaagent/rollout/token_ledger.h"
#include "cudaagent/rollout/tools.h"
#include "cudaagent/rollout/workspace_files.h"
#include "episode_workspace.h"

namespace cudaagent::rollout {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct CallSpan {
  std::string name;
  double seconds = 0;
  bool error = false;
};

struct TurnSpan {
  std::size_t message = 0;  // the reply's index in the conversation
  double model_seconds = 0;
  double tool_seconds = 0;
  int tries = 1;
  std::string finish_reason;
  std::optional<std::int64_t> prompt_tokens, completion_tokens;
  bool text_protocol = false;  // its calls were read from the text
  bool token_prompt = false;   // its prompt went as ids
  std::string note;            // why a token-prompt turn went as messages
  std::vector<CallSpan> calls;
};

struct ServerFacts {
  std::string model, system_fingerprint, tokenizer_fingerprint, chat_template_fingerprint;
  void note(const llm::ChatReply& reply) {
    if (!reply.model.empty()) model = reply.model;
    if (!reply.system_fingerprint.empty()) system_fingerprint = reply.system_fingerprint;
    if (!reply.tokenizer_fingerprint.empty()) tokenizer_fingerprint = reply.tokenizer_fingerprint;
    if (!reply.chat_template_fingerprint.empty()) chat_template_fingerprint = reply.chat_template_fingerprint;
  }
};

void write_optional(JsonWriter& w, std::string_view key, const std::optional<std::int64_t>& value) {
  w.key(key);
  value ? (void)w.value(*value) : (void)w.null();
}

void write_sampling(JsonWriter& w, const llm::SamplingSettings& s) {
  w.begin_object().field("temperature", s.temperature).field("top_p", s.top_p);
  w.key("top_k");
  s.top_k ? (void)w.value(*s.top_k) : (void)w.null();
  w.key("min_p");
  s.min_p ? (void)w.value(*s.min_p) : (void)w.null();
  w.field("max_tokens", s.max_tokens);
  write_optional(w, "seed", s.seed);
  w.key("stop").begin_array();
  for (const std::string& stop : s.stop) w.value(stop);
  w.end_array().end_object();
}

// The shell's environment: the workspace's commands find the evaluator through
// CUDAAGENT_EVAL_SOCKET; bytecode is not written into the read-only utils/.
std::vector<std::string> shell_environment(const EpisodeSettings& settings, const std::string& socket) {
  return {"PATH=" + settings.shell_path,
          "HOME=/tmp",
          "LC_ALL=C.UTF-8",
          "LANG=C.UTF-8",
          "TERM=dumb",
          "USER=agent",
          "LOGNAME=agent",
          "OMP_NUM_THREADS=1",
          "PYTHONDONTWRITEBYTECODE=1",
          "CUDAAGENT_EVAL_SOCKET=" + socket};
}

// Removes the episode's folder (utils/ was made read-only, which would stop an unprivileged rm).
void remove_folders(const detail::EpisodeFolders& folders, bool keep) {
  if (keep || folders.root.empty()) return;
  (void)::chmod((folders.workspace + "/utils").c_str(), 0755);
  std::error_code error;
  std::filesystem::remove_all(folders.root, error);
}

}  // namespace

std::string system_prompt(const EpisodeSettings& settings) {
  std::string text =
      "You are an expert in GPU programming. You work alone in a sandboxed workspace through the tools "
      "you are given: read and write files, run shell commands, compile, verify and profile your code. "
      "Follow the skill document below. Work step by step, check every change with the workspace's "
      "commands, and finish by replying without a tool call.\n\n" +
      settings.skill_text;
  if (settings.tool_protocol == "text") text += "\n\n" + llm::tools_prompt(tool_definitions());
  return text;
}

std::string task_prompt(const std::string& workspace, const std::string& task_id) {
  return "Your workspace is " + workspace + " (task " + task_id.substr(0, 16) +
         "). Read model.py, then write ModelNew in model_new.py with your own kernels in kernels/ so that "
         "`python3 -m utils.verification` passes and `python3 -m utils.profiling` shows it faster than "
         "torch.compile. Relative paths in the tools are relative to the workspace.";
}

std::string episode_id(const std::string& task_id, const std::string& model_py, int sample,
                       const EpisodeSettings& settings) {
  Sha256 hash;
  hash.add_part("cudaagent-rollout-episode").add_part(task_id).add_part(sha256_hex(model_py));
  hash.add_part(std::to_string(sample)).add_part(settings.model).add_part(settings.policy_name);
  hash.add_part(settings.sampling.seed ? std::to_string(*settings.sampling.seed) : "");
  return hash.hex_digest();
}

EpisodeResult run_episode(const EpisodeTask& task, const EpisodeSettings& settings, Policy& policy,
                          EpisodeEvaluator& evaluator, const std::atomic<int>& stop, Logger& log) {
  EpisodeResult result;
  const double started = now_seconds();
  auto made =
      detail::make_episode_folders(settings.work_dir, task.model_py, settings.skill_text, share_dir());
  if (!made) {
    result.error = made.status().message();
    return result;
  }
  const detail::EpisodeFolders folders = std::move(made).value();
  struct Cleanup {
    const detail::EpisodeFolders& folders;
    bool keep;
    ~Cleanup() { remove_folders(folders, keep); }
  } cleanup{folders, settings.keep_workspaces};

  auto files = WorkspaceFiles::open(folders.workspace, folders.workspace, detail::protected_names());
  if (!files) {
    result.error = files.status().message();
    return result;
  }
  const EvalRequest eval_request{task.task_id, task.model_py, folders.workspace, task.episode_id};
  auto server = EvalServer::start(folders.socket, evaluator, eval_request, settings.max_evaluations);
  if (!server) {
    result.error = server.status().message();
    return result;
  }
  ShellSettings shell_settings;
  shell_settings.workspace = folders.workspace;
  for (const std::string& name : detail::protected_names()) {
    std::string path = folders.workspace + "/" + name;
    if (path.back() == '/') path.pop_back();
    shell_settings.protected_paths.push_back(path);
  }
  shell_settings.readable = settings.shell_readable;
  shell_settings.readable.push_back(folders.eval_dir);
  shell_settings.scratch = folders.scratch;
  shell_settings.wrap = settings.sandbox;
  shell_settings.env = shell_environment(settings, folders.socket);
  shell_settings.default_timeout_seconds = settings.command_timeout_seconds;
  shell_settings.max_timeout_seconds = settings.max_command_timeout_seconds;
  shell_settings.limits = settings.shell_limits;
  EvalServer* eval = server.value().get();
  shell_settings.paused_seconds = [eval] { return eval->busy_seconds(); };
  auto shell = std::make_unique<ShellSession>(std::move(shell_settings));
  ToolBox tools(files.value(), *shell);

  llm::ChatRequest request;
  request.model = settings.model;
  request.sampling = settings.sampling;
  request.tokens = settings.tokens;
  request.extra_members = settings.extra_members;
  const bool text_protocol = settings.tool_protocol == "text";
  if (!text_protocol) request.tools = tool_definitions();
  std::vector<llm::ChatMessage>& messages = request.messages;
  messages.push_back({"system", system_prompt(settings), {}, {}, {}, {}});
  messages.push_back({"user", task_prompt(folders.workspace, task.task_id), {}, {}, {}, {}});

  TokenLedger ledger;
  ServerFacts server_facts;
  std::vector<TurnSpan> turns;
  std::string finish_reason, finish_detail;
  std::size_t observation_begin = 0;
  int tool_calls = 0, tool_errors = 0, malformed_calls = 0;
  double model_seconds = 0, tool_seconds = 0;
  for (;;) {
    if (stop.load() != 0) {
      finish_reason = "stopped";
      break;
    }
    if (static_cast<int>(turns.size()) >= settings.max_turns) {
      finish_reason = "max_turns";
      break;
    }
    if (now_seconds() - started >= settings.max_seconds) {
      finish_reason = "wall_time";
      break;
    }
    const std::int64_t room = settings.max_context_tokens - ledger.context_tokens();
    if (room <= 0) {
      finish_reason = "context_limit";
      break;
    }
    request.sampling.max_tokens =
        static_cast<int>(std::min<std::int64_t>(settings.sampling.max_tokens, room));
    eval->set_turn(static_cast<int>(turns.size()));
    llm::ChatFailure failure = llm::ChatFailure::kNone;
    auto answered = policy.next(request, stop, failure);
    if (!answered) {
      finish_reason = failure == llm::ChatFailure::kContextOverflow ? "context_limit"
                      : failure == llm::ChatFailure::kStopped       ? "stopped"
                                                                    : "model_error";
      finish_detail = answered.status().message();
      break;
    }
    PolicyReply& got = answered.value();
    server_facts.note(got.reply);
    model_seconds += got.seconds;
    TurnSpan span;
    span.message = messages.size();
    span.model_seconds = got.seconds;
    span.tries = got.tries;
    span.finish_reason = got.reply.finish_reason;
    span.prompt_tokens = got.reply.prompt_tokens;
    span.completion_tokens = got.reply.completion_tokens;
    span.token_prompt = got.token_prompt;
    span.note = got.note;
    ledger.add_turn(got.reply, observation_begin, messages.size(), messages.size());
    if (got.reply.finish_reason == "script_end") {
      finish_reason = "script_end";
      break;
    }
    llm::ChatMessage reply = llm::assistant_message(got.reply);
    std::vector<llm::ToolCall> calls = reply.tool_calls;
    if (calls.empty() && (text_protocol || reply.content.find("<tool_call>") != std::string::npos)) {
      calls = llm::parse_text_tool_calls(reply.content, static_cast<std::size_t>(tool_calls));
      span.text_protocol = !calls.empty();
    }
    // Results go back as tool messages when the server parsed the calls, or when prompts go as ids
    // with the native protocol (the server's template then renders them as the model was trained;
    // the calls read from the text are attached to the reply, as a tool message needs).
    const bool native_calls = !reply.tool_calls.empty() || (settings.token_prompts && !text_protocol);
    if (native_calls && reply.tool_calls.empty()) reply.tool_calls = calls;
    messages.push_back(reply);
    if (calls.empty()) {
      turns.push_back(std::move(span));
      finish_reason = "stop";
      break;
    }
    const double tools_started = now_seconds();
    std::string text_responses;
    for (const llm::ToolCall& call : calls) {
      const double call_started = now_seconds();
      const ToolResult outcome = tools.call(call, stop);
      const double seconds = now_seconds() - call_started;
      ++tool_calls;
      tool_errors += outcome.error ? 1 : 0;
      malformed_calls += call.name.empty() ? 1 : 0;
      span.calls.push_back({call.name.empty() ? "(malformed)" : call.name, seconds, outcome.error});
      const std::string text = outcome.error ? "Error: " + outcome.text : outcome.text;
      if (native_calls) {
        messages.push_back({"tool", text, {}, call.id, call.name, {}});
      } else {
        text_responses += (text_responses.empty() ? "" : "\n") + llm::tool_response_text(call.name, text);
      }
    }
    if (!native_calls) messages.push_back({"user", text_responses, {}, {}, {}, {}});
    span.tool_seconds = now_seconds() - tools_started;
    tool_seconds += span.tool_seconds;
    turns.push_back(std::move(span));
    observation_begin = messages.size() - (native_calls ? calls.size() : 1);
  }
  if (finish_reason == "stopped") {
    result.finish_reason = finish_reason;
    return result;  // not finished: nothing is written, a resumed run does it again
  }
  // The agent's processes end before the judgement; its evaluation socket closes.
  shell.reset();
  const std::vector<EvalCall> evaluations = eval->calls();
  const double eval_seconds = eval->busy_seconds();
  server.value().reset();
  const double loop_seconds = now_seconds() - started;
  const FinalScore score = evaluator.final_score(eval_request);
  const double final_seconds = now_seconds() - started - loop_seconds;

  // The record: the input record with id, trajectory, candidate, verify, profile and reward set.
  std::string trajectory;
  JsonWriter w(trajectory);
  w.begin_object().field("episode_id", task.episode_id).field("task_id", task.task_id);
  w.field("sample", task.sample).field("model", settings.model).field("policy", policy.describe());
  w.field("endpoint", settings.endpoint).field("tool_protocol", settings.tool_protocol);
  w.field("finish_reason", finish_reason);
  if (!finish_detail.empty()) w.field("finish_detail", finish_detail);
  w.field("turns_used", static_cast<std::int64_t>(turns.size())).field("tool_calls", tool_calls);
  w.field("tool_errors", tool_errors).field("malformed_calls", malformed_calls);
  w.key("seconds").begin_object().field("total", now_seconds() - started).field("loop", loop_seconds);
  w.field("model", model_seconds).field("tools", tool_seconds).field("evaluations", eval_seconds);
  w.field("final_score", final_seconds).end_object();
  w.key("limits").begin_object().field("max_turns", settings.max_turns);
  w.field("max_context_tokens", settings.max_context_tokens)
      .field("max_seconds", settings.max_seconds)
      .end_object();
  w.key("sampling");
  write_sampling(w, settings.sampling);
  w.key("server").begin_object().field("model", server_facts.model);
  w.field("system_fingerprint", server_facts.system_fingerprint);
  w.field("tokenizer_fingerprint", server_facts.tokenizer_fingerprint);
  w.field("chat_template_fingerprint", server_facts.chat_template_fingerprint).end_object();
  w.key("messages").begin_array();
  for (const llm::ChatMessage& message : messages) {
    if (message.reasoning.empty()) {
      llm::write_message_json(w, message);
      continue;
    }
    std::string one;
    JsonWriter m(one);
    llm::write_message_json(m, message);
    std::string with;
    std::string reasoning;
    JsonWriter r(reasoning);
    r.value(message.reasoning);
    (void)append_with_member(with, one, "reasoning", reasoning, false);
    w.raw(with);
  }
  w.end_array();
  w.key("turns").begin_array();
  for (std::size_t t = 0; t < turns.size(); ++t) {
    const TurnSpan& s = turns[t];
    w.begin_object()
        .field("turn", static_cast<std::int64_t>(t))
        .field("message", static_cast<std::int64_t>(s.message));
    w.field("model_seconds", s.model_seconds).field("tool_seconds", s.tool_seconds).field("tries", s.tries);
    w.field("finish_reason", s.finish_reason);
    write_optional(w, "prompt_tokens", s.prompt_tokens);
    write_optional(w, "completion_tokens", s.completion_tokens);
    if (s.text_protocol) w.field("text_protocol", true);
    if (s.token_prompt) w.field("token_prompt", true);
    if (!s.note.empty()) w.field("note", s.note);
    w.key("calls").begin_array();
    for (const CallSpan& call : s.calls) {
      w.begin_object()
          .field("name", call.name)
          .field("seconds", call.seconds)
          .field("error", call.error)
          .end_object();
    }
    w.end_array().end_object();
  }
  w.end_array();
  w.key("evaluations").begin_array();
  for (const EvalCall& call : evaluations) {
    w.begin_object().field("op", call.op).field("turn", call.turn).field("seconds", call.seconds);
    w.field("exit_code", call.exit_code).field("verdict", call.verdict).end_object();
  }
  w.end_array();
  w.key("tokens");
  ledger.write_json(w, settings.base64_tokens);
  w.field("sandbox", settings.sandbox_summary);
  if (settings.keep_workspaces) w.field("workspace", folders.workspace);
  w.key("versions")
      .begin_object()
      .field("cudaagent", build_version())
      .field("commit", build_commit())
      .end_object();
  w.end_object();

  std::string id_json, candidate_json,
      record = task.record_json.empty() ? std::string("{}") : task.record_json;
  JsonWriter(id_json).value(task.episode_id);
  JsonWriter c(candidate_json);
  c.begin_object()
      .key("files")
      .raw(score.candidate_files_json.empty() ? "{}" : score.candidate_files_json)
      .end_object();
  std::vector<std::pair<std::string, std::string>> members = {{"id", id_json},
                                                              {"trajectory", trajectory},
                                                              {"candidate", candidate_json},
                                                              {"verify", score.verify_json}};
  if (!score.profile_json.empty()) members.emplace_back("profile", score.profile_json);
  members.emplace_back("reward", score.reward_json.empty() ? "null" : score.reward_json);
  for (const auto& [key, value] : members) {
    const bool exists = record.find("\"" + key + "\"") != std::string::npos;
    std::string next;
    // key_exists is only a hint for a fast path: append_with_member checks the record itself.
    if (auto status = append_with_member(next, record, key, value, exists); !status) {
      if (auto retry = append_with_member(next = {}, record, key, value, !exists); !retry) {
        result.error = "cannot write the record: " + retry.message();
        return result;
      }
    }
    record = std::move(next);
  }
  record.push_back('\n');
  result.finished = true;
  result.record = std::move(record);
  result.finish_reason = finish_reason;
  result.verdict = score.verdict;
  result.reward = score.reward;
  result.turns = static_cast<int>(turns.size());
  result.seconds = now_seconds() - started;
  (void)log;
  return result;
}

}  // namespace cudaagent::rollout
