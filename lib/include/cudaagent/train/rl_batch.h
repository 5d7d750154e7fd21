// Trajectories as padded tensors (the TokenBatch layout of policy.h) with their per-token
// training tensors, and the row selections that make minibatches, rank shares and micro-batches.
// Selections trim the columns every selected row leaves as padding, so a micro-batch of short
// trajectories does not pay for the batch's longest one.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "cudaagent/train/policy.h"
#include "cudaagent/train/rl_dist.h"
#include "cudaagent/train/rl_trajectory.h"

namespace cudaagent {

struct RlBatch {
  TokenBatch tokens;         // CPU int64 tensors
  at::Tensor mask;           // (B, R) float: the loss mask, 0 on observations and padding
  at::Tensor scores;         // (B) float: each trajectory's reward
  at::Tensor old_log_probs;  // (B, R) float: behaviour log-probs; undefined when not read
  // Filled by the stages as they go (undefined until then); selections carry them along.
  at::Tensor ref_log_probs;  // (B, R) reference model's log-probs
  at::Tensor values;         // (B, R) the critic's values before the update
  at::Tensor advantages;     // (B, R)
  at::Tensor returns;        // (B, R)

  std::int64_t rows() const { return tokens.input_ids.defined() ? tokens.rows() : 0; }
  double trainable_tokens() const;  // sum of the mask
};

// Pads `trajectories` into one batch: prompts left-padded to the longest prompt, responses
// right-padded to the longest response. Behaviour log-probs are taken when every trajectory has
// them.
RlBatch collate(const std::vector<const Trajectory*>& trajectories);

// The rows `rows` of `batch` (in that order), trimmed to the columns they use, with every defined
// tensor selected alike.
RlBatch select_rows(const RlBatch& batch, const std::vector<std::int64_t>& rows);

// The batch with every defined tensor on `device`.
RlBatch to_device(const RlBatch& batch, c10::Device device);

// A forward-only pass over the batch: this rank computes `compute` (a (b, r) tensor for a
// selection) on micro-batches of `micro_batch_size` rows of its share, without gradients, and the
// ranks exchange results, so that every rank returns the (B, R) float CPU tensor of all rows
// (zero on padding).
at::Tensor compute_per_token(const RlBatch& batch, std::int64_t micro_batch_size,
                             Communicator& communicator,
                             const std::function<at::Tensor(const RlBatch&)>& compute);

// Consecutive slices of at most `size` rows (size <= 0: one slice of everything).
std::vector<std::vector<std::int64_t>> split_rows(const std::vector<std::int64_t>& rows,
                                                  std::int64_t size);

// This rank's share of `rows`: every world_size-th row starting at `rank`.
std::vector<std::int64_t> rank_share(const std::vector<std::int64_t>& rows, int rank,
                                     int world_size);

// A deterministic permutation of 0..n-1 from a seed (splitmix64 and Fisher-Yates, the same on
// every platform and library).
std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed);

// Mixes several integers into one seed.
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0);

}  // namespace cudaagent
