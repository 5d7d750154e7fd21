// The settings of the RL stages as plain values (no torch, no JSON parser), so that the code
// that only builds or parses them (the command line, the tool's main) stays cheap to compile.
// Defaults are veRL's where veRL has one.
#pragma once

#include <cstdint>

namespace cudaagent {

// How a (B, R) loss matrix becomes one number.
enum class LossAggregation {
  kTokenMean,         // sum over all tokens / number of tokens (veRL's default)
  kSeqMeanTokenSum,   // mean over rows of each row's token sum
  kSeqMeanTokenMean,  // mean over rows of each row's token mean
};

// Estimators of KL(current || reference) per token, from the two log-probabilities.
enum class KlEstimator {
  kK1,   // "kl" / "k1": log p - log q
  kAbs,  // "abs": |log p - log q|
  kK2,   // "mse" / "k2": 0.5 (log p - log q)^2
  kK3,   // "low_var_kl" / "k3": exp(log q - log p) - (log q - log p) - 1, clamped as veRL does
};

struct PolicyLossSettings {
  double clip_low = 0.2;   // ratio clipped below at 1 - clip_low
  double clip_high = 0.2;  // and above at 1 + clip_high
  double clip_c = 3.0;     // dual clip: for negative advantages the loss is at most -A * clip_c
  LossAggregation aggregation = LossAggregation::kTokenMean;
};

struct OptimizerSettings {
  double lr = 1e-6;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double grad_clip = 1.0;                // max global gradient norm; <= 0: no clipping
  std::int64_t warmup_steps = 0;         // lr rises linearly over the first steps, then stays
  std::int64_t bucket_bytes = 25 << 20;  // gradient all-reduce and parameter broadcast buckets
};

struct Batching {
  std::int64_t mini_batch_size = 0;   // trajectories per optimiser step; 0: the whole batch
  std::int64_t micro_batch_size = 4;  // rows per forward/backward on a rank
  int epochs = 1;                     // passes over each batch (ppo_epochs)
  bool shuffle = false;               // shuffle rows before each pass (seeded per iteration)
  std::uint64_t seed = 1;
};

struct PpoSettings {
  PolicyLossSettings policy;
  double entropy_coef = 0.0;
  double kl_loss_coef = 0.0;  // > 0: KL to the reference as a loss term
  KlEstimator kl_loss_type = KlEstimator::kK3;
  double kl_reward_coef = 0.0;  // > 0: KL to the reference subtracted from rewards
  KlEstimator kl_reward_type = KlEstimator::kK1;
  bool kl_adaptive = false;
  double kl_target = 0.1;
  double kl_horizon = 10000.0;
  double gamma = 1.0;
  double lambda = 1.0;
  bool whiten_advantages = true;
  double cliprange_value = 0.5;
  bool recompute_old_log_probs = false;  // false: the sampler's log-probs are the old policy
  std::int64_t critic_warmup = 0;        // iterations that train the critic only
  Batching batching;
  OptimizerSettings actor_optimizer;
  OptimizerSettings critic_optimizer{.lr = 1e-5};
  bool needs_reference() const { return kl_loss_coef > 0 || kl_reward_coef > 0; }
};

struct ValueSettings {
  double gamma = 1.0;
  double lambda = 1.0;
  double cliprange_value = 0.5;
  LossAggregation aggregation = LossAggregation::kTokenMean;
  Batching batching;
  OptimizerSettings optimizer;
};

struct RftSettings {
  LossAggregation aggregation = LossAggregation::kTokenMean;
  Batching batching;
  OptimizerSettings optimizer;
};

// The behaviour filters of rejection fine-tuning (CUDA Agent keeps positive trajectories without
// wasteful patterns).
struct RftFilter {
  double min_reward = 0.0;         // keep only reward > min_reward
  bool drop_invalid_calls = true;  // any invalid tool call rejects the trajectory
  // A run of this many identical consecutive calls (same name and arguments) is a loop and
  // rejects the trajectory; 0 disables the check.
  int max_identical_calls = 3;
};

}  // namespace cudaagent
