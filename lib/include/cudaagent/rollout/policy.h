// Where an episode's replies come from: a model server (any OpenAI-compatible endpoint), or a
// replay script (`--policy replay:FILE`) whose replies are given in advance — how the tests drive
// whole episodes without a model, and how a user re-runs a recorded conversation against a new
// evaluator.
//
// Key design choice: one Policy object per episode (a server policy owns its HTTP client), so
// episodes share nothing but the immutable settings.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/llm/chat.h"
#include "cudaagent/llm/chat_client.h"

namespace cudaagent::rollout {

struct PolicyReply {
  llm::ChatReply reply;
  double seconds = 0;
  int tries = 1;
  bool token_prompt = false;  // the prompt went as ids (/v1/completions), built from the last sequence
  std::string note;           // why a token-prompt turn went as messages instead, for the record
};

class Policy {
 public:
  virtual ~Policy() = default;
  // The next reply to `request` (its messages are the whole conversation so far). A Status when
  // none can be had; `failure` says what kind.
  virtual Result<PolicyReply> next(const llm::ChatRequest& request, const std::atomic<int>& stop,
                                   llm::ChatFailure& failure) = 0;
  // "server" or "replay:FILE", for the record.
  virtual std::string describe() const = 0;
};

// The model behind an OpenAI-compatible endpoint. With `token_prompts` (vLLM), turns after the
// first are sent as token ids: the previous turn's prompt and sampled reply exactly as they were,
// then the ids the server's chat template adds for the tool results (from /tokenize, see
// llm::observation_ids), to /v1/completions — so the model always continues its own tokens and
// the trajectory is exact by construction. The reply's tool calls are then read from its text. A
// turn whose ids cannot be built that way (a reply cut short, a template that re-renders earlier
// turns, a server without the endpoints) goes as messages, and the next turns start again from it.
class ServerPolicy final : public Policy {
 public:
  ServerPolicy(llm::ChatEndpoint endpoint, std::function<void(const std::string&)> on_retry,
               bool token_prompts = false)
      : client_(std::move(endpoint)), on_retry_(std::move(on_retry)), token_prompts_(token_prompts) {}
  Result<PolicyReply> next(const llm::ChatRequest& request, const std::atomic<int>& stop,
                           llm::ChatFailure& failure) override;
  std::string describe() const override { return token_prompts_ ? "server (token prompts)" : "server"; }

 private:
  // The ids of this turn's prompt, or a Status saying why they cannot be built.
  Result<std::vector<std::int32_t>> token_prompt(const llm::ChatRequest& request, const std::atomic<int>& stop);

  llm::ChatClient client_;
  std::function<void(const std::string&)> on_retry_;
  bool token_prompts_ = false;
  std::vector<std::int32_t> sequence_;  // the last turn's prompt and sampled reply
  bool last_finished_ = false;          // the last reply ended with its end-of-turn token
};

// A replay script: JSON Lines, one assistant reply per line, used in order (the n-th model turn of
// every episode gets line n):
//   {"content": "text", "tool_calls": [{"name": "Read", "arguments": {"file_path": "model.py"}}]}
// "arguments" may be an object or a string holding JSON (a string is sent as it is, so scripts can
// hold malformed arguments on purpose); "finish_reason" is optional. A reply without tool calls
// ends the episode; a script that runs out ends it too (finish reason "script_end").
struct ReplayScript {
  std::vector<llm::ChatReply> replies;
  std::string path;
};
Result<ReplayScript> load_replay_script(const std::string& path);
// The same, from text (one reply per line); `name` for messages.
Result<ReplayScript> parse_replay_script(const std::string& text, const std::string& name);

class ReplayPolicy final : public Policy {
 public:
  explicit ReplayPolicy(std::shared_ptr<const ReplayScript> script) : script_(std::move(script)) {}
  Result<PolicyReply> next(const llm::ChatRequest& request, const std::atomic<int>& stop,
                           llm::ChatFailure& failure) override;
  std::string describe() const override { return "replay:" + script_->path; }

 private:
  std::shared_ptr<const ReplayScript> script_;
};

}  // namespace cudaagent::rollout
