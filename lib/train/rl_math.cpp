// The RL arithmetic on ATen tensors. Elementwise forms follow veRL's core algorithms term by term
// (same clamps, same epsilon); GAE is a scalar loop on the CPU because its backward recursion is
// sequential in the column and a per-column tensor loop would launch one kernel per token.
#include "cudaagent/train/rl_math.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace cudaagent {

at::Tensor masked_sum(const at::Tensor& values, const at::Tensor& mask) {
  return (values * mask).sum();
}

at::Tensor masked_mean(const at::Tensor& values, const at::Tensor& mask) {
  return (values * mask).sum() / mask.sum();
}

at::Tensor masked_var(const at::Tensor& values, const at::Tensor& mask, bool unbiased) {
  at::Tensor mean = masked_mean(values, mask);
  at::Tensor centred = values - mean;
  at::Tensor variance = masked_mean(centred * centred, mask);
  if (unbiased) {
    at::Tensor count = mask.sum();
    variance = variance * count / (count - 1);
  }
  return variance;
}

at::Tensor masked_whiten(const at::Tensor& values, const at::Tensor& mask, bool shift_mean) {
  at::Tensor mean = masked_mean(values, mask);
  at::Tensor variance = masked_var(values, mask, true);
  at::Tensor whitened = (values - mean) * at::rsqrt(variance + 1e-8);
  if (!shift_mean) whitened = whitened + mean;
  return whitened;
}

Result<LossAggregation> parse_loss_aggregation(std::string_view name) {
  if (name == "token-mean") return LossAggregation::kTokenMean;
  if (name == "seq-mean-token-sum") return LossAggregation::kSeqMeanTokenSum;
  if (name == "seq-mean-token-mean") return LossAggregation::kSeqMeanTokenMean;
  return Status::error("unknown loss aggregation '" + std::string(name) +
                       "' (token-mean, seq-mean-token-sum, seq-mean-token-mean)");
}

std::string_view loss_aggregation_name(LossAggregation aggregation) {
  switch (aggregation) {
    case LossAggregation::kTokenMean:
      return "token-mean";
    case LossAggregation::kSeqMeanTokenSum:
      return "seq-mean-token-sum";
    case LossAggregation::kSeqMeanTokenMean:
      return "seq-mean-token-mean";
  }
  return "token-mean";
}

at::Tensor aggregate_loss(const at::Tensor& loss_matrix, const at::Tensor& mask,
                          LossAggregation aggregation, const LossNormaliser& normaliser) {
  at::Tensor masked = loss_matrix * mask;
  switch (aggregation) {
    case LossAggregation::kTokenMean:
      if (normaliser.tokens > 0) return masked.sum() / normaliser.tokens;
      return masked.sum() / mask.sum();
    case LossAggregation::kSeqMeanTokenSum: {
      at::Tensor rows = masked.sum(-1);
      if (normaliser.rows > 0) return rows.sum() / normaliser.rows;
      return rows.mean();
    }
    case LossAggregation::kSeqMeanTokenMean: {
      // A row without tokens contributes 0 rather than 0/0.
      at::Tensor rows = masked.sum(-1) / mask.sum(-1).clamp_min(1.0);
      if (normaliser.rows > 0) return rows.sum() / normaliser.rows;
      return rows.mean();
    }
  }
  return masked.sum() / mask.sum();
}

at::Tensor outcome_rewards(const at::Tensor& scores, const at::Tensor& mask) {
  at::Tensor cpu_mask = mask.to(at::kCPU, at::kFloat).contiguous();
  at::Tensor cpu_scores = scores.to(at::kCPU, at::kFloat).contiguous();
  at::Tensor rewards = at::zeros_like(cpu_mask);
  const std::int64_t rows = cpu_mask.size(0);
  const std::int64_t columns = cpu_mask.size(1);
  const float* m = cpu_mask.data_ptr<float>();
  const float* s = cpu_scores.data_ptr<float>();
  float* r = rewards.data_ptr<float>();
  for (std::int64_t b = 0; b < rows; ++b) {
    for (std::int64_t t = columns - 1; t >= 0; --t) {
      if (m[b * columns + t] != 0.0F) {
        r[b * columns + t] = s[b];
        break;
      }
    }
  }
  return rewards.to(mask.device());
}

AdvantagesAndReturns compute_gae(const at::Tensor& token_rewards, const at::Tensor& values,
                                 const at::Tensor& mask, double gamma, double lambda, bool whiten) {
  at::Tensor r = token_rewards.to(at::kCPU, at::kFloat).contiguous();
  at::Tensor v = values.to(at::kCPU, at::kFloat).contiguous();
  at::Tensor m = mask.to(at::kCPU, at::kFloat).contiguous();
  at::Tensor advantages = at::empty_like(r);
  const std::int64_t rows = r.size(0);
  const std::int64_t columns = r.size(1);
  const float* rp = r.data_ptr<float>();
  const float* vp = v.data_ptr<float>();
  const float* mp = m.data_ptr<float>();
  float* ap = advantages.data_ptr<float>();
  // float arithmetic in veRL's order, so results agree with its float32 tensors.
  const auto g = static_cast<float>(gamma);
  const auto gl = static_cast<float>(gamma * lambda);
  for (std::int64_t b = 0; b < rows; ++b) {
    float next_value = 0.0F;
    float last_advantage = 0.0F;
    for (std::int64_t t = columns - 1; t >= 0; --t) {
      const std::int64_t i = b * columns + t;
      const float delta = rp[i] + g * next_value - vp[i];
      const float advantage = delta + gl * last_advantage;
      if (mp[i] != 0.0F) {
        next_value = vp[i];
        last_advantage = advantage;
      }
      ap[i] = last_advantage;
    }
  }
  at::Tensor returns = advantages + v;
  if (whiten) advantages = masked_whiten(advantages, m);
  return {advantages.to(values.device()), returns.to(values.device())};
}

Result<KlEstimator> parse_kl_estimator(std::string_view name) {
  if (name == "kl" || name == "k1") return KlEstimator::kK1;
  if (name == "abs") return KlEstimator::kAbs;
  if (name == "mse" || name == "k2") return KlEstimator::kK2;
  if (name == "low_var_kl" || name == "k3") return KlEstimator::kK3;
  return Status::error("unknown KL estimator '" + std::string(name) +
                       "' (k1/kl, abs, k2/mse, k3/low_var_kl)");
}

std::string_view kl_estimator_name(KlEstimator estimator) {
  switch (estimator) {
    case KlEstimator::kK1:
      return "k1";
    case KlEstimator::kAbs:
      return "abs";
    case KlEstimator::kK2:
      return "k2";
    case KlEstimator::kK3:
      return "k3";
  }
  return "k1";
}

at::Tensor kl_penalty(const at::Tensor& log_prob, const at::Tensor& ref_log_prob,
                      KlEstimator estimator) {
  switch (estimator) {
    case KlEstimator::kK1:
      return log_prob - ref_log_prob;
    case KlEstimator::kAbs:
      return (log_prob - ref_log_prob).abs();
    case KlEstimator::kK2: {
      at::Tensor diff = log_prob - ref_log_prob;
      return 0.5 * diff * diff;
    }
    case KlEstimator::kK3: {
      at::Tensor kl = (ref_log_prob - log_prob).clamp(-20.0, 20.0);
      return (at::exp(kl) - kl - 1.0).clamp(-10.0, 10.0);
    }
  }
  return log_prob - ref_log_prob;
}

PolicyLossTerms policy_loss(const at::Tensor& old_log_prob, const at::Tensor& log_prob,
                            const at::Tensor& advantages, const at::Tensor& mask,
                            const PolicyLossSettings& settings, const LossNormaliser& normaliser) {
  at::Tensor log_ratio = (log_prob - old_log_prob).clamp(-20.0, 20.0);
  at::Tensor ratio = at::exp(log_ratio);
  PolicyLossTerms terms;
  terms.approx_kl = masked_mean(-log_ratio.detach(), mask);
  at::Tensor unclipped = -advantages * ratio;
  at::Tensor clipped = -advantages * ratio.clamp(1.0 - settings.clip_low, 1.0 + settings.clip_high);
  at::Tensor pessimistic = at::maximum(unclipped, clipped);
  terms.clip_fraction = masked_mean(at::gt(clipped, unclipped).to(at::kFloat).detach(), mask);
  at::Tensor dual_bound = -advantages * settings.clip_c;
  at::Tensor dual = at::minimum(dual_bound, pessimistic);
  at::Tensor negative = at::lt(advantages, 0.0);
  terms.clip_fraction_lower =
      masked_mean((at::gt(pessimistic, dual_bound) & negative).to(at::kFloat).detach(), mask);
  at::Tensor losses = at::where(negative, dual, pessimistic);
  terms.loss = aggregate_loss(losses, mask, settings.aggregation, normaliser);
  terms.ratio = ratio.detach();
  return terms;
}

ValueLossTerms value_loss(const at::Tensor& predicted, const at::Tensor& returns,
                          const at::Tensor& old_values, const at::Tensor& mask, double clip_range,
                          LossAggregation aggregation, const LossNormaliser& normaliser) {
  at::Tensor clipped =
      at::maximum(at::minimum(predicted, old_values + clip_range), old_values - clip_range);
  at::Tensor error_unclipped = (predicted - returns) * (predicted - returns);
  at::Tensor error_clipped = (clipped - returns) * (clipped - returns);
  ValueLossTerms terms;
  terms.loss = 0.5 * aggregate_loss(at::maximum(error_unclipped, error_clipped), mask, aggregation,
                                    normaliser);
  terms.clip_fraction =
      masked_mean(at::gt(error_clipped, error_unclipped).to(at::kFloat).detach(), mask);
  return terms;
}

at::Tensor entropy_from_logits(const at::Tensor& logits) {
  at::Tensor probabilities = at::softmax(logits, -1);
  return at::logsumexp(logits, {-1}) - (probabilities * logits).sum(-1);
}

at::Tensor log_probs_from_logits(const at::Tensor& logits, const at::Tensor& labels) {
  at::Tensor log_probs = at::log_softmax(logits, -1);
  return log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1);
}

void KlController::update(double current_kl, double steps) {
  if (!adaptive) return;
  const double error = std::clamp(current_kl / target - 1.0, -0.2, 0.2);
  value *= 1.0 + error * steps / horizon;
}

}  // namespace cudaagent
