// Token accounting of one episode, for a trainer: the prompt ids, then the model's sampled ids and
// the observation ids between them in order, a loss mask (1 on sampled tokens, 0 on observations)
// and the behaviour log-probs — never re-tokenised, only as the server reported them.
//
// Key design choice: no tokenizer on this side. A server that returns each turn's prompt ids
// (vLLM's prompt_token_ids) tells us the observation tokens exactly: they are what turn t's prompt
// adds after turn t-1's prompt and reply. When a later prompt does not start with the earlier
// sequence (the chat template re-rendered an earlier reply differently: "drift"), each turn's exact
// prompt is still recorded, as the length of the earlier sequence it reuses plus the ids it adds.
// Without prompt ids the observations are kept as text (message ranges), marked missing, so a
// tokenizer can fill them in later; without sampled ids the episode is text-only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/llm/chat.h"

namespace cudaagent::rollout {

enum class TokenStatus {
  kExact,                // one sequence: every prompt extended the previous prompt and reply
  kDrift,                // every id known, but some prompt re-tokenised earlier text (see turns)
  kObservationsMissing,  // the model's ids known, the prompt/observation ids not
  kTextOnly,             // some reply came without ids
};
const char* token_status_name(TokenStatus status);

class TokenLedger {
 public:
  // Adds model turn `reply`. `observation_begin`/`end`: the messages this turn's prompt added after
  // the previous reply (for turn 0: the whole prompt, from 0); `reply_message`: the index the reply
  // gets in the conversation.
  void add_turn(const llm::ChatReply& reply, std::size_t observation_begin, std::size_t observation_end,
                std::size_t reply_message);

  TokenStatus status() const;
  // Tokens of the whole sequence so far (prompt + everything after), or the server's usage count
  // when ids are missing. For the context limit.
  std::int64_t context_tokens() const { return context_tokens_; }

  // The record's "tokens" value. `base64`: ids as encode_u32_base64, log-probs as f32, the mask as
  // u8; otherwise plain JSON arrays.
  void write_json(JsonWriter& json, bool base64) const;

  // For tests and the record: the flat arrays (empty unless status is exact or drift).
  const std::vector<std::int32_t>& prompt_ids() const { return prompt_ids_; }
  const std::vector<std::int32_t>& response_ids() const { return response_ids_; }
  const std::vector<std::uint8_t>& loss_mask() const { return mask_; }
  const std::vector<float>& logprobs() const { return logprobs_; }

 private:
  // One model turn, stored as what it adds, so memory grows with the episode's new tokens only.
  struct Turn {
    std::size_t observation_begin = 0, observation_end = 0, reply_message = 0;
    std::optional<std::size_t> prompt_reused;  // of the previous turn's sequence; unset: no prompt ids
    std::vector<std::int32_t> prompt_added;    // the prompt's ids after the reused part
    std::optional<std::vector<std::int32_t>> reply_ids;
    std::vector<float> logprobs;  // one per reply id, NaN where the server gave none
    bool logprobs_known = false;
  };

  std::vector<Turn> turns_;
  std::vector<std::int32_t> current_;  // the exact sequence of the last turn (prompt + reply)
  bool all_prompts_ = true, all_replies_ = true, drift_ = false;
  std::int64_t context_tokens_ = 0;
  // Kept up to date while every id is known; cleared for good once one is missing.
  std::vector<std::int32_t> prompt_ids_, response_ids_;
  std::vector<std::uint8_t> mask_;
  std::vector<float> logprobs_;
};

}  // namespace cudaagent::rollout
