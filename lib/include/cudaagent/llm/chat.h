// The OpenAI chat-completions protocol as data: messages with tool calls, tool definitions,
// sampling settings, the request body, and the reply read back — including the token ids and
// log-probabilities a trainer needs, in vLLM's form (request `logprobs`, `return_token_ids`,
// `return_tokens_as_token_ids`; reply `prompt_token_ids`, `choices[0].token_ids`,
// `choices[0].logprobs.content[].logprob`). Pure functions over text, so every field is tested
// without a server; chat_client.h sends them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/status.h"

namespace cudaagent::llm {

struct ToolCall {
  std::string id;  // the server's call id; "call_<turn>_<n>" when it gives none
  std::string name;
  std::string arguments;  // JSON text as the model wrote it: may be malformed, never re-encoded
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant messages
  std::string tool_call_id;          // tool messages: the call answered
  std::string name;                  // tool messages: the tool's name
  std::string reasoning;             // assistant: reasoning_content a server split off; not sent back
};

struct ToolDefinition {
  std::string name;
  std::string description;
  std::string parameters;  // a JSON Schema object, as JSON text
};

// Sampling settings. Unset optionals are left out of the request (the server's defaults apply) and
// recorded as null, so a trajectory says exactly what was asked.
struct SamplingSettings {
  double temperature = 1.0;
  double top_p = 1.0;
  std::optional<int> top_k;     // vLLM extension; -1 or unset: off
  std::optional<double> min_p;  // vLLM extension
  int max_tokens = 8192;        // per reply; the episode lowers it near the context limit
  std::optional<std::int64_t> seed;
  std::vector<std::string> stop;
};

// What to ask besides the text: vLLM's extensions for token-exact trajectories.
struct TokenOptions {
  bool logprobs = true;   // "logprobs": true, "top_logprobs": 0
  bool token_ids = true;  // "return_token_ids": true (and "return_tokens_as_token_ids": true, so
                          // older servers still name each sampled id in its logprob entry)
};

struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;  // sent as "tools" (with "tool_choice": "auto") when not empty
  SamplingSettings sampling;
  TokenOptions tokens;
  // Members added to the body as they are, e.g. "\"chat_template_kwargs\":{\"enable_thinking\":false}"
  // (a comma-separated list of JSON members without braces; empty: none). The caller vouches for it.
  std::string extra_members;
};

struct ChatReply {
  std::string content;               // "" when the server sent null
  std::string reasoning;             // reasoning_content / reasoning, when the server splits it
  std::vector<ToolCall> tool_calls;  // the server's parsed calls (native tool calling)
  std::string finish_reason;         // "stop", "length", "tool_calls", ...; "" when absent
  std::optional<std::vector<std::int32_t>> token_ids;         // sampled ids, in order
  std::optional<std::vector<float>> logprobs;                 // one per sampled token
  std::optional<std::vector<std::int32_t>> prompt_token_ids;  // the prompt as the server saw it
  std::optional<std::int64_t> prompt_tokens;                  // usage
  std::optional<std::int64_t> completion_tokens;
  std::string response_id, model, system_fingerprint;
  // Tokenizer and chat-template fingerprints, where a server states them (top-level
  // "tokenizer_fingerprint" / "chat_template_fingerprint"; cudaagent-train serve does).
  std::string tokenizer_fingerprint, chat_template_fingerprint;
};

// The JSON body of POST /v1/chat/completions.
std::string chat_request_body(const ChatRequest& request);

// Reads a chat-completion response body. A Status when the body is not a completion: not JSON,
// an error object ("server error: <message>"), no choices, a choice without a message. Token
// fields the server did not send stay empty; ids come from "token_ids", else from logprob entries
// named "token_id:<n>"; a logprob entry whose value is null reads as NaN, so the array keeps one
// value per token. Thread-safe.
Result<ChatReply> parse_chat_reply(std::string_view body);

// endpoint + "/v1/chat/completions", unless it already ends in "/chat/completions" ("/v1" is not
// doubled).
std::string chat_completions_url(std::string_view endpoint);

// The assistant message a reply becomes in the conversation (content, tool calls, reasoning).
ChatMessage assistant_message(const ChatReply& reply);

// Writes `message` as an OpenAI message object: role, content, and tool_calls (assistant) or
// tool_call_id and name (tool). The trajectory record uses the same form.
void write_message_json(JsonWriter& json, const ChatMessage& message);

}  // namespace cudaagent::llm
