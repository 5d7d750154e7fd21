// A chat client for any OpenAI-compatible server (vLLM, SGLang, llama.cpp server, cudaagent-train
// serve) over the project's libcurl HttpClient: timeouts, retries with back-off on 408/429/5xx and
// dropped connections, an optional bearer key, and one fallback a real server needs — a server
// that rejects vLLM's token extensions (HTTP 400 naming them) is asked again without them, once,
// and the client remembers, so its replies are text-only from then on.
//
// Key design choice: one client per thread (it owns one HttpClient, whose connection is reused),
// nothing shared, so episodes run in parallel without locks.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "cudaagent/base/status.h"
#include "cudaagent/llm/chat.h"
#include "cudaagent/llm/http.h"
#include "cudaagent/llm/token_prompt.h"

namespace cudaagent::llm {

struct ChatEndpoint {
  std::string url;               // base URL or the full .../chat/completions URL
  std::string api_key;           // sent as "Authorization: Bearer <key>" when not empty
  double timeout_seconds = 600;  // one request, the whole transfer
  double connect_timeout_seconds = 10;
  RetryPolicy retry;  // 3 retries from 1 s, doubling, at most 30 s
};

// Why a request gave no reply, for the caller's decision (an episode ends differently on each).
enum class ChatFailure {
  kNone,
  kTransport,        // no answer after every retry (refused, timed out, dropped, 5xx/429 to the end)
  kContextOverflow,  // HTTP 400 saying the prompt is longer than the model's context
  kRejected,         // another 4xx: the request itself is wrong (model name, a field)
  kBadReply,         // HTTP 200 with a body that is not a chat completion
  kStopped,          // the stop flag was raised
};

struct ChatOutcome {
  ChatReply reply;
  double seconds = 0;  // from the first try to the reply, retries included
  int tries = 1;
};

class ChatClient {
 public:
  explicit ChatClient(ChatEndpoint endpoint);

  // Sends `request` and reads the reply. On failure the Status says why and `failure` (when given)
  // the kind. `on_retry` hears each retried failure ("HTTP 500: ...; retrying in 2.00 s").
  // `stop` (a signal number; 0 for none) abandons the request. Not thread-safe: one per thread.
  Result<ChatOutcome> complete(const ChatRequest& request, const std::atomic<int>& stop,
                               const std::function<void(const std::string&)>& on_retry = {},
                               ChatFailure* failure = nullptr);

  // POST /v1/completions with the prompt as ids (vLLM), read as a ChatReply whose content is the
  // text (no tool parsing: the caller reads calls from it). Failures as complete().
  Result<ChatOutcome> complete_tokens(const CompletionRequest& request, const std::atomic<int>& stop,
                                      const std::function<void(const std::string&)>& on_retry = {},
                                      ChatFailure* failure = nullptr);

  // POST /tokenize (vLLM, at the server's root): `messages` rendered by the server's chat template
  // (with `tools`, and the generation prompt when asked), as ids. Not retried beyond the policy.
  Result<std::vector<std::int32_t>> tokenize(const std::string& model, const std::vector<ChatMessage>& messages,
                                             const std::vector<ToolDefinition>& tools, bool add_generation_prompt,
                                             const std::atomic<int>& stop, ChatFailure* failure = nullptr);

  // False once the server refused vLLM's token fields: later requests leave them out.
  bool token_fields_accepted() const { return token_fields_accepted_; }
  const std::string& url() const { return url_; }

 private:
  Result<HttpResponse> post(const std::string& url, std::string body, const std::atomic<int>& stop,
                            const std::function<void(const std::string&)>& on_retry, int& tries,
                            ChatFailure& failure);
  Status check(const std::string& url, const HttpResponse& response, ChatFailure& failure) const;

  ChatEndpoint endpoint_;
  std::string url_;       // .../v1/chat/completions
  std::string base_url_;  // the server's root
  HttpClient http_;
  bool token_fields_accepted_ = true;
};

// Whether an HTTP 400 body says the prompt does not fit the model's context (vLLM: "maximum
// context length", llama.cpp: "exceeds the available context size", OpenAI:
// "context_length_exceeded").
bool is_context_overflow(std::string_view body);

// Whether an HTTP 400 body names one of vLLM's token fields as unknown (OpenAI: "Unrecognized
// request argument supplied: return_token_ids"; pydantic: "Extra inputs are not permitted").
bool rejects_token_fields(std::string_view body);

}  // namespace cudaagent::llm
