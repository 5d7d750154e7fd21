// vLLM's token-in endpoints, for episodes that send later turns as token ids so nothing the model
// sampled is ever re-tokenised: POST /tokenize renders messages with the server's own chat template
// and returns the ids, and POST /v1/completions takes a prompt of ids. Pure functions over text;
// ChatClient sends them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/llm/chat.h"

namespace cudaagent::llm {

// The server's root: the endpoint without "/v1/chat/completions", "/chat/completions" or "/v1".
std::string server_base_url(std::string_view endpoint);

// {"model", "messages", "add_generation_prompt", "tools" (when not empty)} for POST /tokenize.
std::string tokenize_request_body(const std::string& model, const std::vector<ChatMessage>& messages,
                                  const std::vector<ToolDefinition>& tools, bool add_generation_prompt);
// The ids of a /tokenize reply ({"tokens": [...]}); a Status when there are none.
Result<std::vector<std::int32_t>> parse_tokenize_reply(std::string_view body);

struct CompletionRequest {
  std::string model;
  std::vector<std::int32_t> prompt_ids;
  SamplingSettings sampling;
  TokenOptions tokens;
  std::string extra_members;  // as ChatRequest::extra_members
};
// The body of POST /v1/completions with the prompt as ids ("logprobs": 1 asks for the sampled
// tokens' log-probabilities in the completions API's form).
std::string completion_request_body(const CompletionRequest& request);
// A completion reply as a ChatReply: content is choices[0].text; ids from choices[0].token_ids
// (else from "token_id:<n>" entries of logprobs.tokens); log-probs from logprobs.token_logprobs.
Result<ChatReply> parse_completion_reply(std::string_view body);

// The observation ids of the next turn: what the chat template adds after the model's reply.
// `closed` renders the conversation up to and including the reply (no generation prompt), `open`
// the whole conversation with the generation prompt, `last_sampled` is the reply's last sampled id
// (its end-of-turn token). The observation starts right after the last `last_sampled` in `closed`
// (so the template's text after the end-of-turn token, such as its newline, belongs to it) and is
// the rest of `open`. A Status when `open` does not extend `closed` up to there (the template
// renders earlier turns differently once more follow), or the id is not in `closed`.
Result<std::vector<std::int32_t>> observation_ids(const std::vector<std::int32_t>& closed,
                                                  const std::vector<std::int32_t>& open,
                                                  std::int32_t last_sampled);

}  // namespace cudaagent::llm
