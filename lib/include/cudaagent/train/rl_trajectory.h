// Trajectories as the RL stages read them: the token-exact fields of a cudaagent-rollout record
// (prompt ids, response ids with model and observation tokens in order, the loss mask, the
// sampler's log-probabilities, tool calls) and its reward, plus the behaviour filters of rejection
// fine-tuning. Pure C++ (no torch), so the reading and filtering rules are tested without a model.
//
// The fields read, by path in the record (the rest of the record is ignored):
//   id                               string, optional (error records and metrics name it)
//   trajectory.prompt_ids            array of token ids (integers >= 0)
//   trajectory.response_ids          array of token ids; model and observation tokens in order
//   trajectory.loss_mask             array of 0/1, one per response token; 0 on observation tokens
//   trajectory.logprobs              array of numbers (<= 0), one per response token: the sampler's
//                                    log-probability of each model token; null or any value on
//                                    observation tokens (ignored). Required by `ppo` only.
//   trajectory.finish_reason         string, optional
//   trajectory.turns[].tool_calls[]  optional; {name: string, arguments: any JSON, ok: bool or
//                                    error: string|null}: a call is invalid when ok is false or
//                                    error is a non-null value. Read by the rft filters only.
//   reward.value                     number: the trajectory's scalar reward (cudaagent-reward)
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/train/rl_settings.h"

namespace cudaagent {

struct RlToolCall {
  std::string name;
  std::string arguments;  // the arguments' JSON text, minified: equal calls compare equal
  bool valid = true;
};

struct Trajectory {
  std::string id;
  std::vector<std::int32_t> prompt_ids;
  std::vector<std::int32_t> response_ids;
  std::vector<std::uint8_t> loss_mask;     // one per response token, 0 or 1
  std::vector<float> behaviour_log_probs;  // one per response token, or empty when not read
  std::string finish_reason;
  double reward = 0.0;
  std::vector<RlToolCall> tool_calls;  // in episode order; empty when not read

  std::size_t trainable_tokens() const;  // response tokens with loss mask 1
};

struct TrajectoryReadOptions {
  bool need_log_probs = false;   // ppo: trajectory.logprobs must be present and valid
  bool need_reward = true;       // reward.value must be present (every stage today)
  bool read_tool_calls = false;  // rft's filters
  // A token id at or above this is an error (0: unchecked). The model's vocabulary size.
  std::int64_t vocab_size = 0;
};

// Reads one record. A Status says why the record cannot be trained on (it becomes an error
// record): a missing or mistyped field, arrays of different lengths, a mask value other than 0/1,
// no trainable token, a positive or non-finite log-probability on a model token, a token id out
// of range.
Result<Trajectory> read_trajectory(simdjson::dom::object record,
                                   const TrajectoryReadOptions& options);

// Empty when the trajectory passes; otherwise the reason it is dropped ("reward 0 <= 0",
// "invalid tool call 4 (Bash)", "tool-call loop: 3 identical consecutive calls to Read").
std::string rft_rejection(const Trajectory& trajectory, const RftFilter& filter);

}  // namespace cudaagent
