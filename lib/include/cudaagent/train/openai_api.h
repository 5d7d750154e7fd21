// The OpenAI chat-completions wire format as `cudaagent-train serve` speaks it: request bodies in,
// response bodies out, and the tool-call parser for model output. No model and no HTTP here, so
// every rule is tested on strings. Field names and meanings follow OpenAI's API, and where OpenAI
// has nothing (token ids, raw log-probabilities, ignore_eos) they follow vLLM's extensions, so a
// client written for vLLM gets the same fields from us (man/cudaagent-train.1 lists them).
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/train/chat_template.h"
#include "cudaagent/train/tokenizer.h"

namespace cudaagent::train {

// How one request samples. Temperature 0 is greedy decoding.
struct SamplingOptions {
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;                       // 0 or negative: no top-k cut
  std::optional<std::int64_t> max_tokens;  // none: up to the context length
  std::optional<std::uint64_t> seed;   // none: the server's own random seed
  bool ignore_eos = false;             // vLLM's: do not stop at end-of-sequence tokens
  std::vector<TokenId> stop_token_ids; // vLLM's: extra ids that end the completion
  bool logprobs = false;               // OpenAI's: per-token log-probabilities in the choice
  int top_logprobs = 0;                // OpenAI's: that many alternatives per position (<= 20)
};

struct ChatCompletionRequest {
  std::string model;
  ChatPrompt prompt;
  // vLLM-style extension: the prompt as token ids, used instead of rendering `prompt` (which may
  // then be empty), so a rollout that already holds ids never re-tokenises.
  std::optional<std::vector<TokenId>> prompt_token_ids;
  SamplingOptions sampling;
  bool return_token_ids = false;            // vLLM's: prompt_token_ids and choices[].token_ids
  bool return_tokens_as_token_ids = false;  // vLLM's: logprobs tokens written "token_id:123"
  bool skip_special_tokens = true;          // in the returned text
  bool parse_tool_calls = true;             // false when tool_choice is "none"
};

// One chat message from its OpenAI JSON form: role, content (a string, null, or a list of text
// parts joined with "\n" as vLLM does), tool_calls (arguments as a JSON string or an object),
// tool_call_id.
Result<ChatMessage> parse_chat_message(simdjson::dom::element message);

// The request body. A Status (the client's error, HTTP 400) for anything malformed or not
// supported: stream, n > 1, stop strings, a tool_choice naming a function.
Result<ChatCompletionRequest> parse_chat_completion_request(std::string_view body);

// Tool calls found in generated text: each <tool_call>{"name": ..., "arguments": ...}</tool_call>
// whose body is a JSON object with a string name and arguments (an unclosed last call runs to the
// end of the text). `content` is the text before the first call, none when that is empty, as
// vLLM's Hermes-style parser returns it.
// Arguments are JSON text in Python's form (json.dumps). Text with no valid call is all content.
struct ParsedToolCalls {
  std::optional<std::string> content;
  std::vector<ToolCall> calls;
};
ParsedToolCalls parse_tool_calls(std::string_view text);

// What the engine produced for one choice, ready to be written.
struct Completion {
  std::vector<TokenId> prompt_ids;
  std::vector<TokenId> ids;             // generated ids, the stop token included when there is one
  std::vector<float> logprobs;          // one per generated id: log-softmax of the raw logits
  std::vector<std::vector<std::pair<TokenId, float>>> top_logprobs;  // per id, best first
  std::string finish_reason;            // "stop" or "length"
  std::uint64_t weights_version = 0;    // which loaded checkpoint produced it (serve's reloads)
};

// The response body of one completion. `id` and `created` are the caller's (so tests can fix
// them). Thread-safe.
std::string write_chat_completion(const ChatCompletionRequest& request, const Completion& completion,
                                  const Tokenizer& tokenizer, const std::string& id,
                                  std::int64_t created);

// {"error": {"message", "type", "param", "code"}} as OpenAI writes it.
std::string write_error(int http_status, std::string_view message);

}  // namespace cudaagent::train
