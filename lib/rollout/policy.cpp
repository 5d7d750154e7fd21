// The two policies. The replay script is parsed once and shared read-only by every episode.
#include "cudaagent/rollout/policy.h"

#include <simdjson.h>

#include "cudaagent/base/files.h"
#include "cudaagent/llm/token_prompt.h"

namespace cudaagent::rollout {

Result<std::vector<std::int32_t>> ServerPolicy::token_prompt(const llm::ChatRequest& request,
                                                              const std::atomic<int>& stop) {
  if (sequence_.empty()) return Status::error("no previous sequence");
  if (!last_finished_) return Status::error("the last reply did not end with its end-of-turn token");
  std::size_t last_reply = request.messages.size();
  while (last_reply > 0 && request.messages[last_reply - 1].role != "assistant") --last_reply;
  if (last_reply == 0) return Status::error("no previous reply");
  const std::vector<llm::ChatMessage> closed_messages(request.messages.begin(),
                                                      request.messages.begin() + static_cast<std::ptrdiff_t>(last_reply));
  auto closed = client_.tokenize(request.model, closed_messages, request.tools, false, stop);
  if (!closed) return closed.status().with_context("/tokenize");
  auto open = client_.tokenize(request.model, request.messages, request.tools, true, stop);
  if (!open) return open.status().with_context("/tokenize");
  auto observation = llm::observation_ids(closed.value(), open.value(), sequence_.back());
  if (!observation) return observation.status();
  std::vector<std::int32_t> prompt = sequence_;
  prompt.insert(prompt.end(), observation.value().begin(), observation.value().end());
  return prompt;
}

Result<PolicyReply> ServerPolicy::next(const llm::ChatRequest& request, const std::atomic<int>& stop,
                                       llm::ChatFailure& failure) {
  std::string note;
  if (token_prompts_ && !sequence_.empty()) {
    auto prompt = token_prompt(request, stop);
    if (prompt) {
      llm::CompletionRequest completion{request.model, prompt.value(), request.sampling, request.tokens,
                                        request.extra_members};
      auto outcome = client_.complete_tokens(completion, stop, on_retry_, &failure);
      if (!outcome && failure != llm::ChatFailure::kRejected) return outcome.status();
      if (outcome && outcome.value().reply.token_ids && !outcome.value().reply.token_ids->empty()) {
        PolicyReply out{std::move(outcome.value().reply), outcome.value().seconds, outcome.value().tries, true, {}};
        out.reply.prompt_token_ids = prompt.value();  // exactly what was sent
        sequence_ = prompt.value();
        sequence_.insert(sequence_.end(), out.reply.token_ids->begin(), out.reply.token_ids->end());
        last_finished_ = out.reply.finish_reason == "stop";
        return out;
      }
      note = outcome ? "/v1/completions returned no token ids" : outcome.status().message();
    } else {
      note = prompt.status().message();
    }
    if (stop.load() != 0) {
      failure = llm::ChatFailure::kStopped;
      return Status::error("stopped by a signal");
    }
  }
  auto outcome = client_.complete(request, stop, on_retry_, &failure);
  if (!outcome) return outcome.status();
  PolicyReply out{std::move(outcome.value().reply), outcome.value().seconds, outcome.value().tries, false, note};
  sequence_.clear();
  if (token_prompts_ && out.reply.prompt_token_ids && out.reply.token_ids) {
    sequence_ = *out.reply.prompt_token_ids;
    sequence_.insert(sequence_.end(), out.reply.token_ids->begin(), out.reply.token_ids->end());
    last_finished_ = out.reply.finish_reason == "stop" || out.reply.finish_reason == "tool_calls";
  }
  return out;
}

Result<ReplayScript> parse_replay_script(const std::string& text, const std::string& name) {
  ReplayScript script;
  script.path = name;
  simdjson::dom::parser parser;
  std::size_t line_no = 0, start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "'" + name + "' line " + std::to_string(line_no) + ": ";
    simdjson::dom::object object;
    if (parser.parse(line).get(object)) return Status::error(where + "not a JSON object");
    llm::ChatReply reply;
    std::string_view content;
    if (!object["content"].get(content)) reply.content = std::string(content);
    std::string_view finish;
    if (!object["finish_reason"].get(finish)) reply.finish_reason = std::string(finish);
    simdjson::dom::array calls;
    if (auto field = object["tool_calls"]; field.error() != simdjson::NO_SUCH_FIELD) {
      if (field.get(calls)) return Status::error(where + "\"tool_calls\" must be an array");
      for (simdjson::dom::element item : calls) {
        llm::ToolCall call;
        call.id = "call_" + std::to_string(reply.tool_calls.size());
        std::string_view call_name;
        if (item["name"].get(call_name)) return Status::error(where + "a tool call without a \"name\"");
        call.name = std::string(call_name);
        simdjson::dom::element arguments;
        if (!item["arguments"].get(arguments)) {
          std::string_view raw;
          call.arguments = arguments.get(raw) ? simdjson::minify(arguments) : std::string(raw);
        } else {
          call.arguments = "{}";
        }
        reply.tool_calls.push_back(std::move(call));
      }
    }
    if (reply.finish_reason.empty()) reply.finish_reason = reply.tool_calls.empty() ? "stop" : "tool_calls";
    script.replies.push_back(std::move(reply));
  }
  if (script.replies.empty()) return Status::error("the replay script '" + name + "' holds no replies");
  return script;
}

Result<ReplayScript> load_replay_script(const std::string& path) {
  std::string text;
  if (!read_whole_file(path, text)) return Status::error("cannot read the replay script '" + path + "'");
  return parse_replay_script(text, path);
}

Result<PolicyReply> ReplayPolicy::next(const llm::ChatRequest& request, const std::atomic<int>& stop,
                                       llm::ChatFailure& failure) {
  failure = llm::ChatFailure::kNone;
  if (stop.load() != 0) {
    failure = llm::ChatFailure::kStopped;
    return Status::error("stopped by a signal");
  }
  std::size_t turn = 0;
  for (const llm::ChatMessage& message : request.messages) turn += message.role == "assistant" ? 1 : 0;
  PolicyReply out;
  if (turn >= script_->replies.size()) {
    out.reply.finish_reason = "script_end";  // the episode ends as if the model had answered
    return out;
  }
  out.reply = script_->replies[turn];
  return out;
}

}  // namespace cudaagent::rollout
