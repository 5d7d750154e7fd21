// Parsing chat-completion requests and writing responses. A request that asks for something we do
// not do (streaming, several choices, stop strings, penalties) is refused with a message naming the
// field, rather than answered as if it had been honoured.
#include "cudaagent/train/openai_api.h"

#include <algorithm>
#include <cmath>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/train/python_json.h"

namespace cudaagent::train {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

bool present(element parent, std::string_view key, element& value) {
  return parent[key].get(value) == simdjson::SUCCESS && !value.is_null();
}

Status read_content(element message, std::optional<std::string>& out) {
  element content;
  if (!present(message, "content", content)) return Status::ok();
  std::string_view text;
  if (content.get(text) == simdjson::SUCCESS) {
    out = std::string(text);
    return Status::ok();
  }
  array parts;
  if (content.get(parts) != simdjson::SUCCESS) return Status::error("content must be a string, null or a list of parts");
  std::string joined;
  bool first = true;
  for (element part : parts) {
    std::string_view type, part_text;
    if (part["type"].get(type) != simdjson::SUCCESS || type != "text" ||
        part["text"].get(part_text) != simdjson::SUCCESS) {
      return Status::error("only text content parts are supported");
    }
    if (!first) joined.push_back('\n');
    first = false;
    joined += part_text;
  }
  out = std::move(joined);
  return Status::ok();
}

Result<ToolCall> read_tool_call(element entry) {
  element function;
  if (!present(entry, "function", function)) function = entry;  // the template accepts both forms
  ToolCall call;
  std::string_view text;
  if (entry["id"].get(text) == simdjson::SUCCESS) call.id = text;
  if (function["name"].get(text) != simdjson::SUCCESS) return Status::error("a tool call without a function name");
  call.name = text;
  element arguments;
  if (!present(function, "arguments", arguments)) return Status::error("tool call '" + call.name + "' has no arguments");
  if (arguments.get(text) == simdjson::SUCCESS) {
    call.arguments = text;
    call.arguments_is_string = true;
  } else {
    call.arguments = simdjson::minify(arguments);
    call.arguments_is_string = false;
  }
  return call;
}

template <class T>
Status read_number(element body, std::string_view key, T& out, double low, double high) {
  element value;
  if (!present(body, key, value)) return Status::ok();
  double number = 0;
  if (value.get(number) != simdjson::SUCCESS || !(number >= low && number <= high)) {
    return Status::error("'" + std::string(key) + "' must be a number in [" + std::to_string(low) + ", " +
                         std::to_string(high) + "]");
  }
  if constexpr (std::is_integral_v<T>) {
    if (number != std::floor(number)) return Status::error("'" + std::string(key) + "' must be an integer");
  }
  out = static_cast<T>(number);
  return Status::ok();
}

Status read_bool(element body, std::string_view key, bool& out) {
  element value;
  if (!present(body, key, value)) return Status::ok();
  if (value.get(out) != simdjson::SUCCESS) return Status::error("'" + std::string(key) + "' must be true or false");
  return Status::ok();
}

Result<std::vector<TokenId>> read_ids(element value, std::string_view key) {
  array list;
  if (value.get(list) != simdjson::SUCCESS) return Status::error("'" + std::string(key) + "' must be a list of token ids");
  std::vector<TokenId> ids;
  for (element item : list) {
    std::int64_t id = 0;
    if (item.get(id) != simdjson::SUCCESS || id < 0 || id > INT32_MAX) {
      return Status::error("'" + std::string(key) + "' must be a list of token ids");
    }
    ids.push_back(static_cast<TokenId>(id));
  }
  return ids;
}

Status read_sampling(element body, SamplingOptions& s) {
  if (Status st = read_number(body, "temperature", s.temperature, 0.0, 100.0); !st) return st;
  if (Status st = read_number(body, "top_p", s.top_p, 1e-9, 1.0); !st) return st;
  if (Status st = read_number(body, "top_k", s.top_k, -1.0, 1e9); !st) return st;
  std::int64_t max_tokens = 0;
  for (const std::string_view key : {"max_tokens", "max_completion_tokens"}) {
    element value;
    if (!present(body, key, value)) continue;
    if (Status st = read_number(body, key, max_tokens, 1.0, 1e12); !st) return st;
    s.max_tokens = max_tokens;
  }
  element value;
  if (present(body, "seed", value)) {
    std::int64_t seed = 0;
    std::uint64_t useed = 0;
    if (value.get(seed) == simdjson::SUCCESS) s.seed = static_cast<std::uint64_t>(seed);
    else if (value.get(useed) == simdjson::SUCCESS) s.seed = useed;
    else return Status::error("'seed' must be an integer");
  }
  if (Status st = read_bool(body, "ignore_eos", s.ignore_eos); !st) return st;
  if (present(body, "stop_token_ids", value)) {
    auto ids = read_ids(value, "stop_token_ids");
    if (!ids) return ids.status();
    s.stop_token_ids = std::move(ids).value();
  }
  if (Status st = read_bool(body, "logprobs", s.logprobs); !st) return st;
  if (Status st = read_number(body, "top_logprobs", s.top_logprobs, 0.0, 20.0); !st) return st;
  if (s.top_logprobs > 0 && !s.logprobs) return Status::error("'top_logprobs' needs 'logprobs': true");
  return Status::ok();
}

// Fields that change what is generated and that we do not implement: refused unless neutral.
Status refuse_unsupported(element body) {
  element value;
  bool flag = false;
  if (present(body, "stream", value) && (value.get(flag) != simdjson::SUCCESS || flag)) {
    return Status::error("'stream' is not supported: ask for the whole completion");
  }
  std::int64_t n = 1;
  if (present(body, "n", value) && (value.get(n) != simdjson::SUCCESS || n != 1)) {
    return Status::error("'n' must be 1");
  }
  if (present(body, "stop", value)) {
    std::string_view text;
    array list;
    const bool empty = (value.get(text) == simdjson::SUCCESS && text.empty()) ||
                       (value.get(list) == simdjson::SUCCESS && list.size() == 0);
    if (!empty) return Status::error("'stop' strings are not supported: use 'stop_token_ids'");
  }
  for (const auto& [key, neutral] : {std::pair<std::string_view, double>{"frequency_penalty", 0.0},
                                     {"presence_penalty", 0.0}, {"repetition_penalty", 1.0},
                                     {"min_p", 0.0}}) {
    double number = neutral;
    if (present(body, key, value) && (value.get(number) != simdjson::SUCCESS || number != neutral)) {
      return Status::error("'" + std::string(key) + "' is not supported");
    }
  }
  return Status::ok();
}

}  // namespace

Result<ChatMessage> parse_chat_message(element message) {
  ChatMessage out;
  std::string_view role;
  if (message["role"].get(role) != simdjson::SUCCESS) return Status::error("a message without a role");
  out.role = role;
  if (Status s = read_content(message, out.content); !s) return s;
  element value;
  if (present(message, "tool_calls", value)) {
    array calls;
    if (value.get(calls) != simdjson::SUCCESS) return Status::error("'tool_calls' must be a list");
    for (element entry : calls) {
      auto call = read_tool_call(entry);
      if (!call) return call.status();
      out.tool_calls.push_back(std::move(call).value());
    }
  }
  std::string_view text;
  if (message["tool_call_id"].get(text) == simdjson::SUCCESS) out.tool_call_id = text;
  return out;
}

Result<ChatCompletionRequest> parse_chat_completion_request(std::string_view body_text) {
  simdjson::dom::parser parser;
  element body;
  if (auto error = parser.parse(body_text.data(), body_text.size()).get(body); error) {
    return Status::error(std::string("the body is not JSON: ") + simdjson::error_message(error));
  }
  if (!body.is_object()) return Status::error("the body must be a JSON object");
  if (Status s = refuse_unsupported(body); !s) return s;
  ChatCompletionRequest request;
  std::string_view text;
  if (body["model"].get(text) == simdjson::SUCCESS) request.model = text;
  element value;
  if (present(body, "prompt_token_ids", value)) {
    auto ids = read_ids(value, "prompt_token_ids");
    if (!ids) return ids.status();
    if (ids.value().empty()) return Status::error("'prompt_token_ids' is empty");
    request.prompt_token_ids = std::move(ids).value();
  }
  if (present(body, "messages", value)) {
    array messages;
    if (value.get(messages) != simdjson::SUCCESS) return Status::error("'messages' must be a list");
    std::size_t index = 0;
    for (element message : messages) {
      auto parsed = parse_chat_message(message);
      if (!parsed) return parsed.status().with_context("messages[" + std::to_string(index) + "]");
      request.prompt.messages.push_back(std::move(parsed).value());
      ++index;
    }
  }
  if (request.prompt.messages.empty() && !request.prompt_token_ids) {
    return Status::error("'messages' (or 'prompt_token_ids') is required");
  }
  if (present(body, "tools", value)) {
    array tools;
    if (value.get(tools) != simdjson::SUCCESS) return Status::error("'tools' must be a list");
    for (element tool : tools) request.prompt.tools.push_back(simdjson::minify(tool));
  }
  if (present(body, "tool_choice", value)) {
    if (value.get(text) != simdjson::SUCCESS || (text != "auto" && text != "none")) {
      return Status::error("'tool_choice' must be \"auto\" or \"none\"");
    }
    request.parse_tool_calls = text != "none";
  }
  if (Status s = read_bool(body, "add_generation_prompt", request.prompt.add_generation_prompt); !s) return s;
  if (Status s = read_sampling(body, request.sampling); !s) return s;
  if (Status s = read_bool(body, "return_token_ids", request.return_token_ids); !s) return s;
  if (Status s = read_bool(body, "return_tokens_as_token_ids", request.return_tokens_as_token_ids); !s) return s;
  if (Status s = read_bool(body, "skip_special_tokens", request.skip_special_tokens); !s) return s;
  return request;
}

ParsedToolCalls parse_tool_calls(std::string_view text) {
  constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  ParsedToolCalls parsed;
  const std::size_t first = text.find(kOpen);
  if (first == std::string_view::npos) {
    parsed.content = std::string(text);
    return parsed;
  }
  simdjson::dom::parser parser;
  for (std::size_t at = first; at != std::string_view::npos; at = text.find(kOpen, at)) {
    const std::size_t body_start = at + kOpen.size();
    const std::size_t close = text.find(kClose, body_start);
    // An unclosed last call runs to the end of the text (the model stopped before closing it).
    const std::string_view body = text.substr(body_start, close == std::string_view::npos ? std::string_view::npos
                                                                                       : close - body_start);
    element root;
    std::string_view name;
    element arguments;
    const std::string copy(body);
    if (parser.parse(copy).get(root) != simdjson::SUCCESS || !root.is_object() ||
        root["name"].get(name) != simdjson::SUCCESS || root["arguments"].get(arguments) != simdjson::SUCCESS) {
      return ParsedToolCalls{std::string(text), {}};  // one bad call: the whole text is content
    }
    auto dumped = python_json_dumps(simdjson::minify(arguments));
    if (!dumped) return ParsedToolCalls{std::string(text), {}};
    parsed.calls.push_back(ToolCall{"", std::string(name), std::move(dumped).value(), true});
    at = close == std::string_view::npos ? close : close + kClose.size();
  }
  if (first > 0) parsed.content = std::string(text.substr(0, first));
  return parsed;
}

namespace {

// Writes {"token", "logprob", "bytes" and leaves the object open for the caller's last field.
void write_token(JsonWriter& w, const ChatCompletionRequest& request, const Tokenizer& tokenizer,
                 TokenId id, float logprob) {
  const TokenId one[] = {id};
  const std::string bytes = tokenizer.decode_bytes(one);
  w.begin_object();
  if (request.return_tokens_as_token_ids) w.field("token", "token_id:" + std::to_string(id));
  else w.field("token", utf8_lossy(bytes));
  // vLLM writes -9999.0 for a log-probability of minus infinity.
  w.field("logprob", std::isfinite(logprob) ? static_cast<double>(logprob) : -9999.0);
  w.key("bytes").begin_array();
  for (const char c : bytes) w.value(static_cast<std::int64_t>(static_cast<unsigned char>(c)));
  w.end_array();
}

void write_id_list(JsonWriter& w, std::string_view key, const std::vector<TokenId>& ids) {
  w.key(key).begin_array();
  for (const TokenId id : ids) w.value(static_cast<std::int64_t>(id));
  w.end_array();
}

}  // namespace

std::string write_chat_completion(const ChatCompletionRequest& request, const Completion& completion,
                                  const Tokenizer& tokenizer, const std::string& id,
                                  std::int64_t created) {
  const std::string text = tokenizer.decode(completion.ids, request.skip_special_tokens);
  ParsedToolCalls parsed;
  if (request.parse_tool_calls && !request.prompt.tools.empty()) parsed = parse_tool_calls(text);
  else parsed.content = text;
  std::string finish_reason = completion.finish_reason;
  if (!parsed.calls.empty()) finish_reason = "tool_calls";

  std::string out;
  JsonWriter w(out);
  w.begin_object().field("id", id).field("object", "chat.completion").field("created", created);
  w.field("model", request.model);
  w.key("choices").begin_array().begin_object().field("index", 0);
  w.key("message").begin_object().field("role", "assistant");
  w.key("content");
  if (parsed.content) w.value(*parsed.content);
  else w.null();
  w.key("tool_calls").begin_array();
  for (std::size_t i = 0; i < parsed.calls.size(); ++i) {
    w.begin_object().field("id", "call-" + id + "-" + std::to_string(i)).field("type", "function");
    w.key("function").begin_object().field("name", parsed.calls[i].name);
    w.field("arguments", parsed.calls[i].arguments).end_object().end_object();
  }
  w.end_array().end_object();
  w.key("logprobs");
  if (request.sampling.logprobs) {
    w.begin_object().key("content").begin_array();
    for (std::size_t i = 0; i < completion.ids.size(); ++i) {
      write_token(w, request, tokenizer, completion.ids[i], completion.logprobs[i]);
      w.key("top_logprobs").begin_array();
      if (i < completion.top_logprobs.size()) {
        for (const auto& [alt, alt_logprob] : completion.top_logprobs[i]) {
          write_token(w, request, tokenizer, alt, alt_logprob);
          w.end_object();
        }
      }
      w.end_array().end_object();
    }
    w.end_array().end_object();
  } else {
    w.null();
  }
  w.field("finish_reason", finish_reason);
  w.key("stop_reason");
  const auto& stops = request.sampling.stop_token_ids;
  if (completion.finish_reason == "stop" && !completion.ids.empty() &&
      std::find(stops.begin(), stops.end(), completion.ids.back()) != stops.end()) {
    w.value(static_cast<std::int64_t>(completion.ids.back()));
  } else {
    w.null();
  }
  if (request.return_token_ids) write_id_list(w, "token_ids", completion.ids);
  w.end_object().end_array();
  const auto prompt_tokens = static_cast<std::int64_t>(completion.prompt_ids.size());
  const auto completion_tokens = static_cast<std::int64_t>(completion.ids.size());
  w.key("usage").begin_object().field("prompt_tokens", prompt_tokens);
  w.field("completion_tokens", completion_tokens).field("total_tokens", prompt_tokens + completion_tokens);
  w.end_object();
  if (request.return_token_ids) write_id_list(w, "prompt_token_ids", completion.prompt_ids);
  w.field("weights_version", static_cast<std::int64_t>(completion.weights_version));
  w.end_object();
  return out;
}

std::string write_error(int http_status, std::string_view message) {
  std::string out;
  JsonWriter w(out);
  const char* type = http_status == 404 ? "NotFoundError"
                     : http_status < 500 ? "BadRequestError"
                                         : "InternalServerError";
  w.begin_object().key("error").begin_object().field("message", message).field("type", type);
  w.key("param").null().field("code", http_status).end_object().end_object();
  return out;
}

}  // namespace cudaagent::train
