// The arithmetic of the RL stages, defined as veRL's core algorithms define it so that a run can
// be cross-checked against a Python stack: masked statistics and whitening, generalised advantage
// estimation that skips observation tokens, the clipped PPO surrogate with dual clip, the clipped
// value loss, KL estimators, entropy and loss aggregation. Tensors are (B, R): rows are
// trajectories, columns response tokens; `mask` is the loss mask as float (1 on model tokens,
// 0 on observation tokens and padding). Functions are pure and thread-compatible.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>

#include "cudaagent/base/status.h"
#include "cudaagent/train/rl_settings.h"

namespace cudaagent {

// sum(values * mask), a 0-dim tensor.
at::Tensor masked_sum(const at::Tensor& values, const at::Tensor& mask);
// sum(values * mask) / sum(mask). NaN when the mask is empty (as in veRL).
at::Tensor masked_mean(const at::Tensor& values, const at::Tensor& mask);
// The masked variance about the masked mean; `unbiased` applies Bessel's correction n / (n - 1).
at::Tensor masked_var(const at::Tensor& values, const at::Tensor& mask, bool unbiased = true);
// (values - mean) / sqrt(var + 1e-8) with the masked mean and unbiased variance; every entry is
// transformed (masked-out ones too). With shift_mean false the mean is added back.
at::Tensor masked_whiten(const at::Tensor& values, const at::Tensor& mask, bool shift_mean = true);

Result<LossAggregation> parse_loss_aggregation(std::string_view name);  // "token-mean", ...
std::string_view loss_aggregation_name(LossAggregation aggregation);

// The denominators when one minibatch is split into micro-batches (and across ranks) whose
// losses are summed: the minibatch's token count and row count. Zero means "this tensor's own",
// which gives veRL's per-call value. With the minibatch's counts, the sum of the micro-batch
// losses equals the loss of the whole minibatch, whatever the split.
struct LossNormaliser {
  double tokens = 0.0;
  double rows = 0.0;
};
at::Tensor aggregate_loss(const at::Tensor& loss_matrix, const at::Tensor& mask,
                          LossAggregation aggregation, const LossNormaliser& normaliser = {});

// (B, R) token-level rewards: each row's score on its last token with mask 1, zero elsewhere.
// `scores` is (B). A row without a trainable token gets no reward.
at::Tensor outcome_rewards(const at::Tensor& scores, const at::Tensor& mask);

struct AdvantagesAndReturns {
  at::Tensor advantages;  // (B, R) float32
  at::Tensor returns;     // (B, R) float32: advantages (before whitening) + values
};
// Generalised advantage estimation over each row, backwards from its end with V = 0 after it.
// Columns with mask 0 are skipped: they add no TD error, and the running advantage and the next
// value are carried across them unchanged, so an observation span neither breaks the bootstrap
// nor leaks rewards or values into the model's tokens. At masked columns the advantage holds the
// carried value (losses ignore it). With `whiten` the advantages are masked-whitened over the
// whole batch afterwards (veRL's compute_gae_advantage_return). Computed on the CPU; the result
// is on the inputs' device.
AdvantagesAndReturns compute_gae(const at::Tensor& token_rewards, const at::Tensor& values,
                                 const at::Tensor& mask, double gamma, double lambda,
                                 bool whiten = true);

Result<KlEstimator> parse_kl_estimator(std::string_view name);
std::string_view kl_estimator_name(KlEstimator estimator);
at::Tensor kl_penalty(const at::Tensor& log_prob, const at::Tensor& ref_log_prob,
                      KlEstimator estimator);

struct PolicyLossTerms {
  at::Tensor loss;                 // 0-dim, differentiable
  at::Tensor clip_fraction;        // masked mean of "the clipped term was taken"
  at::Tensor clip_fraction_lower;  // masked mean of "the dual clip was taken" (A < 0)
  at::Tensor approx_kl;            // masked mean of old_log_prob - log_prob
  at::Tensor ratio;                // (B, R) detached importance ratios
};
// veRL's "vanilla" clipped surrogate. log ratios are clamped to [-20, 20] before exp.
PolicyLossTerms policy_loss(const at::Tensor& old_log_prob, const at::Tensor& log_prob,
                            const at::Tensor& advantages, const at::Tensor& mask,
                            const PolicyLossSettings& settings,
                            const LossNormaliser& normaliser = {});

struct ValueLossTerms {
  at::Tensor loss;           // 0-dim: 0.5 * aggregate(max(unclipped, clipped) squared error)
  at::Tensor clip_fraction;  // masked mean of "the clipped error was larger"
};
ValueLossTerms value_loss(const at::Tensor& predicted, const at::Tensor& returns,
                          const at::Tensor& old_values, const at::Tensor& mask, double clip_range,
                          LossAggregation aggregation, const LossNormaliser& normaliser = {});

// Entropy of the categorical distribution of each row of logits (last dimension).
at::Tensor entropy_from_logits(const at::Tensor& logits);
// log softmax(logits)[label] for each position; labels has the shape of logits without the last
// dimension.
at::Tensor log_probs_from_logits(const at::Tensor& logits, const at::Tensor& labels);

// The KL coefficient when the penalty is subtracted from the rewards: fixed, or adaptive
// (proportional control toward a target KL over a horizon, as veRL's AdaptiveKLController).
struct KlController {
  double value = 0.001;
  bool adaptive = false;
  double target = 0.1;
  double horizon = 10000.0;
  void update(double current_kl, double steps);
};

}  // namespace cudaagent
