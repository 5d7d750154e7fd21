// Request bodies and replies of /v1/chat/completions. The reply is read defensively: a server that
// sends tool arguments as an object instead of a string, null content, or logprob entries without
// values still gives a usable reply, and counts that do not match are left for the caller to judge.
#include "cudaagent/llm/chat.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace cudaagent::llm {
namespace {

using Field = simdjson::simdjson_result<simdjson::dom::element>;

// A missing field, null, or another type all read as "".
std::string_view string_or_empty(Field field) {
  std::string_view text;
  return field.get(text) ? std::string_view() : text;
}

// Reads an int array (token ids); false when it is not one.
bool read_ids(Field field, std::vector<std::int32_t>& out) {
  simdjson::dom::array array;
  if (field.get(array)) return false;
  out.clear();
  out.reserve(array.size());
  for (simdjson::dom::element item : array) {
    std::int64_t id = 0;
    if (item.get(id) || id < 0 || id > std::numeric_limits<std::int32_t>::max()) return false;
    out.push_back(static_cast<std::int32_t>(id));
  }
  return true;
}

// choices[0].logprobs.content: [{"token": "...", "logprob": -0.1, ...}, ...]. Fills `ids` too when
// every entry names its id as "token_id:<n>" (vLLM's return_tokens_as_token_ids).
void read_logprobs(simdjson::dom::element choice, ChatReply& reply) {
  simdjson::dom::array content;
  if (choice["logprobs"]["content"].get(content)) return;
  std::vector<float> values;
  std::vector<std::int32_t> ids;
  bool ids_ok = true;
  values.reserve(content.size());
  for (simdjson::dom::element entry : content) {
    double value = 0;
    values.push_back(entry["logprob"].get(value) ? std::numeric_limits<float>::quiet_NaN()
                                                 : static_cast<float>(value));
    std::string_view token = string_or_empty(entry["token"]);
    std::int32_t id = 0;
    constexpr std::string_view kPrefix = "token_id:";
    if (ids_ok && token.substr(0, kPrefix.size()) == kPrefix) {
      const char* begin = token.data() + kPrefix.size();
      const char* end = token.data() + token.size();
      const auto [ptr, ec] = std::from_chars(begin, end, id);
      ids_ok = ec == std::errc() && ptr == end && id >= 0;
      ids.push_back(id);
    } else {
      ids_ok = false;
    }
  }
  reply.logprobs = std::move(values);
  if (ids_ok && !ids.empty() && !reply.token_ids) reply.token_ids = std::move(ids);
}

ToolCall read_tool_call(simdjson::dom::element call, std::size_t index) {
  ToolCall out;
  out.id = std::string(string_or_empty(call["id"]));
  if (out.id.empty()) out.id = "call_" + std::to_string(index);
  simdjson::dom::element function;
  if (call["function"].get(function)) return out;
  out.name = std::string(string_or_empty(function["name"]));
  simdjson::dom::element arguments;
  if (!function["arguments"].get(arguments)) {
    std::string_view text;
    if (!arguments.get(text)) {
      out.arguments = std::string(text);
    } else if (!arguments.is_null()) {
      out.arguments = simdjson::minify(arguments);  // some servers send an object
    }
  }
  return out;
}

void write_sampling(JsonWriter& w, const SamplingSettings& s) {
  w.field("temperature", s.temperature).field("top_p", s.top_p);
  if (s.top_k) w.field("top_k", *s.top_k);
  if (s.min_p) w.field("min_p", *s.min_p);
  w.field("max_tokens", s.max_tokens);
  if (s.seed) w.field("seed", *s.seed);
  if (!s.stop.empty()) {
    w.key("stop").begin_array();
    for (const std::string& stop : s.stop) w.value(stop);
    w.end_array();
  }
}

}  // namespace

void write_message_json(JsonWriter& w, const ChatMessage& m) {
  w.begin_object().field("role", m.role).field("content", m.content);
  if (!m.tool_calls.empty()) {
    w.key("tool_calls").begin_array();
    for (const ToolCall& call : m.tool_calls) {
      w.begin_object().field("id", call.id).field("type", "function").key("function").begin_object();
      w.field("name", call.name).field("arguments", call.arguments).end_object().end_object();
    }
    w.end_array();
  }
  if (!m.tool_call_id.empty()) w.field("tool_call_id", m.tool_call_id);
  if (!m.name.empty()) w.field("name", m.name);
  w.end_object();
}

std::string chat_request_body(const ChatRequest& request) {
  std::string body;
  JsonWriter w(body);
  w.begin_object().field("model", request.model).key("messages").begin_array();
  for (const ChatMessage& message : request.messages) write_message_json(w, message);
  w.end_array();
  if (!request.tools.empty()) {
    w.key("tools").begin_array();
    for (const ToolDefinition& tool : request.tools) {
      w.begin_object().field("type", "function").key("function").begin_object();
      w.field("name", tool.name).field("description", tool.description);
      w.key("parameters").raw(tool.parameters).end_object().end_object();
    }
    w.end_array().field("tool_choice", "auto");
  }
  write_sampling(w, request.sampling);
  if (request.tokens.logprobs) w.field("logprobs", true).field("top_logprobs", 0);
  if (request.tokens.token_ids) {
    w.field("return_token_ids", true).field("return_tokens_as_token_ids", true);
  }
  w.field("stream", false);
  w.end_object();
  if (!request.extra_members.empty()) {
    body.pop_back();  // the closing brace
    body += "," + request.extra_members + "}";
  }
  return body;
}

Result<ChatReply> parse_chat_reply(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::padded_string padded(body);
  if (auto error = parser.parse(padded).get(root)) {
    std::string prefix(body.substr(0, 80));
    std::replace(prefix.begin(), prefix.end(), '\n', ' ');
    return Status::error(std::string("response is not JSON (") + simdjson::error_message(error) + "): '" +
                         prefix + "'");
  }
  simdjson::dom::array choices;
  if (root["choices"].get(choices) || choices.size() == 0) {
    std::string_view message;
    if (!root["error"]["message"].get(message)) return Status::error("server error: " + std::string(message));
    return Status::error("response is not a chat completion: no choices");
  }
  const simdjson::dom::element choice = choices.at(0);
  simdjson::dom::object message;
  if (choice["message"].get(message)) {
    return Status::error("response is not a chat completion: no choices[0].message");
  }
  ChatReply reply;
  reply.content = std::string(string_or_empty(message["content"]));
  reply.reasoning = std::string(string_or_empty(message["reasoning_content"]));
  if (reply.reasoning.empty()) reply.reasoning = std::string(string_or_empty(message["reasoning"]));
  simdjson::dom::array calls;
  if (!message["tool_calls"].get(calls)) {
    std::size_t index = 0;
    for (simdjson::dom::element call : calls) reply.tool_calls.push_back(read_tool_call(call, index++));
  }
  reply.finish_reason = std::string(string_or_empty(choice["finish_reason"]));
  std::vector<std::int32_t> ids;
  if (read_ids(choice["token_ids"], ids)) reply.token_ids = std::move(ids);
  if (read_ids(root["prompt_token_ids"], ids)) reply.prompt_token_ids = std::move(ids);
  read_logprobs(choice, reply);
  std::int64_t count = 0;
  if (!root["usage"]["prompt_tokens"].get(count)) reply.prompt_tokens = count;
  if (!root["usage"]["completion_tokens"].get(count)) reply.completion_tokens = count;
  reply.response_id = std::string(string_or_empty(root["id"]));
  reply.model = std::string(string_or_empty(root["model"]));
  reply.system_fingerprint = std::string(string_or_empty(root["system_fingerprint"]));
  reply.tokenizer_fingerprint = std::string(string_or_empty(root["tokenizer_fingerprint"]));
  reply.chat_template_fingerprint = std::string(string_or_empty(root["chat_template_fingerprint"]));
  return reply;
}

std::string chat_completions_url(std::string_view endpoint) {
  std::string url(endpoint);
  while (!url.empty() && url.back() == '/') url.pop_back();
  constexpr std::string_view kSuffix = "/chat/completions";
  if (url.size() >= kSuffix.size() &&
      url.compare(url.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0) {
    return url;
  }
  if (url.size() >= 3 && url.compare(url.size() - 3, 3, "/v1") == 0) return url + std::string(kSuffix);
  return url + "/v1" + std::string(kSuffix);
}

ChatMessage assistant_message(const ChatReply& reply) {
  ChatMessage message;
  message.role = "assistant";
  message.content = reply.content;
  message.tool_calls = reply.tool_calls;
  message.reasoning = reply.reasoning;
  return message;
}

}  // namespace cudaagent::llm
