// The token-in requests and replies. The completions API differs from chat in its log-probs
// (parallel arrays under logprobs) and has no tool parsing: the caller reads calls from the text.
#include "cudaagent/llm/token_prompt.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace cudaagent::llm {
namespace {

using Field = simdjson::simdjson_result<simdjson::dom::element>;

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

bool read_token_ids(Field field, std::vector<std::int32_t>& out) {
  simdjson::dom::array array;
  if (field.get(array)) return false;
  out.clear();
  for (simdjson::dom::element item : array) {
    std::int64_t id = 0;
    if (item.get(id) || id < 0 || id > std::numeric_limits<std::int32_t>::max()) return false;
    out.push_back(static_cast<std::int32_t>(id));
  }
  return true;
}

Result<simdjson::dom::element> parse(simdjson::dom::parser& parser, std::string_view body) {
  simdjson::dom::element root;
  simdjson::padded_string padded(body);
  if (auto error = parser.parse(padded).get(root)) {
    std::string prefix(body.substr(0, 80));
    std::replace(prefix.begin(), prefix.end(), '\n', ' ');
    return Status::error(std::string("response is not JSON (") + simdjson::error_message(error) + "): '" +
                         prefix + "'");
  }
  std::string_view message;
  if (!root["error"]["message"].get(message)) return Status::error("server error: " + std::string(message));
  return root;
}

}  // namespace

std::string server_base_url(std::string_view endpoint) {
  std::string url(endpoint);
  while (!url.empty() && url.back() == '/') url.pop_back();
  for (std::string_view suffix : {"/chat/completions", "/v1"}) {
    if (ends_with(url, suffix)) url.resize(url.size() - suffix.size());
  }
  return url;
}

std::string tokenize_request_body(const std::string& model, const std::vector<ChatMessage>& messages,
                                  const std::vector<ToolDefinition>& tools, bool add_generation_prompt) {
  std::string body;
  JsonWriter w(body);
  w.begin_object().field("model", model).key("messages").begin_array();
  for (const ChatMessage& message : messages) write_message_json(w, message);
  w.end_array().field("add_generation_prompt", add_generation_prompt);
  if (!tools.empty()) {
    w.key("tools").begin_array();
    for (const ToolDefinition& tool : tools) {
      w.begin_object().field("type", "function").key("function").begin_object();
      w.field("name", tool.name).field("description", tool.description);
      w.key("parameters").raw(tool.parameters).end_object().end_object();
    }
    w.end_array();
  }
  w.end_object();
  return body;
}

Result<std::vector<std::int32_t>> parse_tokenize_reply(std::string_view body) {
  simdjson::dom::parser parser;
  auto root = parse(parser, body);
  if (!root) return root.status();
  std::vector<std::int32_t> ids;
  if (!read_token_ids(root.value()["tokens"], ids)) return Status::error("the /tokenize reply has no \"tokens\" list");
  return ids;
}

std::string completion_request_body(const CompletionRequest& request) {
  std::string body;
  JsonWriter w(body);
  w.begin_object().field("model", request.model).key("prompt").begin_array();
  for (std::int32_t id : request.prompt_ids) w.value(static_cast<std::int64_t>(id));
  w.end_array();
  const SamplingSettings& s = request.sampling;
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
  if (request.tokens.logprobs) w.field("logprobs", 1);
  if (request.tokens.token_ids) w.field("return_token_ids", true).field("return_tokens_as_token_ids", true);
  w.field("stream", false).end_object();
  if (!request.extra_members.empty()) {
    body.pop_back();
    body += "," + request.extra_members + "}";
  }
  return body;
}

Result<ChatReply> parse_completion_reply(std::string_view body) {
  simdjson::dom::parser parser;
  auto parsed = parse(parser, body);
  if (!parsed) return parsed.status();
  const simdjson::dom::element root = parsed.value();
  simdjson::dom::array choices;
  if (root["choices"].get(choices) || choices.size() == 0) {
    return Status::error("response is not a completion: no choices");
  }
  const simdjson::dom::element choice = choices.at(0);
  ChatReply reply;
  std::string_view text;
  if (choice["text"].get(text)) return Status::error("response is not a completion: no choices[0].text");
  reply.content = std::string(text);
  std::string_view finish;
  if (!choice["finish_reason"].get(finish)) reply.finish_reason = std::string(finish);
  std::vector<std::int32_t> ids;
  if (read_token_ids(choice["token_ids"], ids)) reply.token_ids = ids;
  if (read_token_ids(choice["prompt_token_ids"], ids) || read_token_ids(root["prompt_token_ids"], ids)) {
    reply.prompt_token_ids = ids;
  }
  simdjson::dom::array logprobs, tokens;
  if (!choice["logprobs"]["token_logprobs"].get(logprobs)) {
    std::vector<float> values;
    for (simdjson::dom::element item : logprobs) {
      double value = 0;
      values.push_back(item.get(value) ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(value));
    }
    reply.logprobs = std::move(values);
  }
  if (!reply.token_ids && !choice["logprobs"]["tokens"].get(tokens) && tokens.size() > 0) {
    std::vector<std::int32_t> named;
    for (simdjson::dom::element item : tokens) {
      std::string_view token;
      std::int32_t id = 0;
      constexpr std::string_view kPrefix = "token_id:";
      if (item.get(token) || token.substr(0, kPrefix.size()) != kPrefix) break;
      const auto [end, ec] = std::from_chars(token.data() + kPrefix.size(), token.data() + token.size(), id);
      if (ec != std::errc() || end != token.data() + token.size()) break;
      named.push_back(id);
    }
    if (named.size() == tokens.size()) reply.token_ids = std::move(named);
  }
  std::int64_t count = 0;
  if (!root["usage"]["prompt_tokens"].get(count)) reply.prompt_tokens = count;
  if (!root["usage"]["completion_tokens"].get(count)) reply.completion_tokens = count;
  std::string_view field;
  if (!root["id"].get(field)) reply.response_id = std::string(field);
  if (!root["model"].get(field)) reply.model = std::string(field);
  if (!root["system_fingerprint"].get(field)) reply.system_fingerprint = std::string(field);
  if (!root["tokenizer_fingerprint"].get(field)) reply.tokenizer_fingerprint = std::string(field);
  if (!root["chat_template_fingerprint"].get(field)) reply.chat_template_fingerprint = std::string(field);
  return reply;
}

Result<std::vector<std::int32_t>> observation_ids(const std::vector<std::int32_t>& closed,
                                                  const std::vector<std::int32_t>& open,
                                                  std::int32_t last_sampled) {
  const auto last = std::find(closed.rbegin(), closed.rend(), last_sampled);
  if (last == closed.rend()) {
    return Status::error("the reply's last token " + std::to_string(last_sampled) +
                         " is not in the template's rendering of it");
  }
  const std::size_t start = static_cast<std::size_t>(closed.rend() - last);  // one past it
  if (open.size() < start || !std::equal(closed.begin(), closed.begin() + static_cast<std::ptrdiff_t>(start),
                                         open.begin())) {
    return Status::error("the chat template renders the conversation differently once it goes on");
  }
  return std::vector<std::int32_t>(open.begin() + static_cast<std::ptrdiff_t>(start), open.end());
}

}  // namespace cudaagent::llm
