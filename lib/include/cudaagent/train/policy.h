// The seam between the RL stages and a model: a PolicyModel (a trainable causal LM: the actor, and
// the frozen reference) and a ValueModel (the critic, a scalar per token). The stages never see a
// model's architecture; any model that fills these two interfaces trains under rft, value and ppo.
//
// Batches use veRL's padded layout so that every row's response starts in the same column: each
// row is [left padding][prompt][response][right padding]. Position ids restart at 0 on each row's
// first real token, so a model sees the same positions it would see without padding.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

struct TokenBatch {
  at::Tensor input_ids;             // (B, L) int64; padding holds token 0
  at::Tensor attention_mask;        // (B, L) int64: 1 on prompt and response tokens, 0 on padding
  at::Tensor position_ids;          // (B, L) int64: 0 at a row's first real token, counting up
  std::int64_t response_start = 0;  // P: responses occupy columns [P, L), prompts end at P - 1

  std::int64_t rows() const { return input_ids.size(0); }
  std::int64_t response_length() const { return input_ids.size(1) - response_start; }
};

// What a causal LM says about the response tokens of a batch: column j is about the token in
// column P + j, predicted from the tokens before it (the logits of column P + j - 1).
struct ResponseScores {
  at::Tensor log_probs;  // (B, R) float32: log p(token | prefix); differentiable in grad mode
  at::Tensor entropy;    // (B, R) float32 entropy of that next-token distribution; undefined
                         // unless asked for
};

// What every trainable model offers the optimiser and the checkpoints.
class TrainableModel {
 public:
  virtual ~TrainableModel() = default;
  // Every trainable tensor (leaves that require grad), always in the same order.
  virtual std::vector<at::Tensor> parameters() = 0;
  // Their names, in the same order (checkpoints key optimiser state by them).
  virtual std::vector<std::string> parameter_names() const = 0;
  virtual c10::Device device() const = 0;
  // Token ids at or above this are out of range.
  virtual std::int64_t vocab_size() const = 0;
  // Writes the model to `directory` (created if missing) so that load_*_model(directory) reads
  // it back exactly. Not thread-safe with a concurrent update.
  virtual Status save(const std::string& directory) const = 0;
};

class PolicyModel : public TrainableModel {
 public:
  // Scores the response tokens of `batch` (on this model's device). Padding columns hold
  // arbitrary finite values; callers mask them. With `with_entropy` the entropies are computed
  // too (differentiable as well).
  virtual ResponseScores score_response(const TokenBatch& batch, bool with_entropy) = 0;
};

class ValueModel : public TrainableModel {
 public:
  // (B, R) float32: column j is the value of the state before response token j (computed at
  // column P + j - 1, as veRL's critic does). Differentiable in grad mode.
  virtual at::Tensor values(const TokenBatch& batch) = 0;
};

}  // namespace cudaagent
