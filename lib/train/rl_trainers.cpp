// Value pre-training and rejection fine-tuning: the two single-model trainers, on the same
// minibatch and micro-batch machinery as PPO.
#include <ATen/ATen.h>

#include <chrono>

#include "cudaagent/train/rl_ppo.h"
#include "rl_update.h"

namespace cudaagent {

ValueTrainer::ValueTrainer(ValueModel& critic, const ValueSettings& settings,
                           Communicator& communicator)
    : critic_(critic),
      settings_(settings),
      communicator_(communicator),
      optimizer_(critic.parameters(), critic.parameter_names(), settings.optimizer, communicator) {}

MetricList ValueTrainer::iteration(const std::vector<const Trajectory*>& trajectories,
                                   std::int64_t iteration) {
  const auto started = std::chrono::steady_clock::now();
  RlBatch batch = collate(trajectories);
  const auto& batching = settings_.batching;
  MetricList metrics;
  batch.values =
      compute_per_token(batch, batching.micro_batch_size, communicator_,
                        [&](const RlBatch& part) { return critic_.values(part.tokens); });
  at::Tensor rewards = outcome_rewards(batch.scores, batch.mask);
  auto gae =
      compute_gae(rewards, batch.values, batch.mask, settings_.gamma, settings_.lambda, false);
  batch.advantages = gae.advantages;
  batch.returns = gae.returns;
  append_data_metrics(batch, rewards, metrics);
  // How much of the returns' variance the critic explained before this update.
  at::Tensor residual_variance = masked_var(batch.returns - batch.values, batch.mask, false);
  at::Tensor return_variance = masked_var(batch.returns, batch.mask, false);
  metrics.emplace_back("critic/vf_explained_var",
                       (1.0 - residual_variance / (return_variance + 1e-8)).item<double>());

  UpdateTotals totals;
  for (int epoch = 0; epoch < batching.epochs; ++epoch) {
    for (const auto& minibatch : minibatches(batch.rows(), batching, iteration, epoch)) {
      const LossNormaliser normaliser = minibatch_normaliser(batch, minibatch);
      UpdateSums sums({"critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "tokens"}, {});
      for_each_micro_batch(
          batch, minibatch, batching.micro_batch_size, communicator_, critic_.device(),
          [&](const RlBatch& part) {
            at::Tensor predicted = critic_.values(part.tokens);
            ValueLossTerms value =
                value_loss(predicted, part.returns, part.values, part.mask,
                           settings_.cliprange_value, settings_.aggregation, normaliser);
            value.loss.backward();
            const double tokens = part.mask.sum().item<double>();
            sums.add("critic/vf_loss", value.loss.item<double>());
            sums.add("critic/vf_clipfrac", value.clip_fraction.item<double>() * tokens);
            sums.add("critic/vpred_mean",
                     masked_mean(predicted.detach(), part.mask).item<double>() * tokens);
            sums.add("tokens", tokens);
          });
      sums.reduce(communicator_);
      totals.add_minibatch(sums, optimizer_.step());
    }
  }
  totals.append(metrics, "critic", {"critic/vf_loss"}, {"critic/vf_clipfrac", "critic/vpred_mean"});
  append_time_metrics(batch, started, metrics);
  return metrics;
}

RftTrainer::RftTrainer(PolicyModel& model, const RftSettings& settings, Communicator& communicator)
    : model_(model),
      settings_(settings),
      communicator_(communicator),
      optimizer_(model.parameters(), model.parameter_names(), settings.optimizer, communicator) {}

MetricList RftTrainer::iteration(const std::vector<const Trajectory*>& trajectories,
                                 std::int64_t iteration) {
  const auto started = std::chrono::steady_clock::now();
  RlBatch batch = collate(trajectories);
  const auto& batching = settings_.batching;
  MetricList metrics;
  append_data_metrics(batch, at::Tensor(), metrics);
  UpdateTotals totals;
  for (int epoch = 0; epoch < batching.epochs; ++epoch) {
    for (const auto& minibatch : minibatches(batch.rows(), batching, iteration, epoch)) {
      const LossNormaliser normaliser = minibatch_normaliser(batch, minibatch);
      UpdateSums sums({"rft/loss", "rft/token_log_prob", "tokens"}, {});
      for_each_micro_batch(
          batch, minibatch, batching.micro_batch_size, communicator_, model_.device(),
          [&](const RlBatch& part) {
            ResponseScores scores = model_.score_response(part.tokens, false);
            at::Tensor loss =
                aggregate_loss(-scores.log_probs, part.mask, settings_.aggregation, normaliser);
            loss.backward();
            const double tokens = part.mask.sum().item<double>();
            sums.add("rft/loss", loss.item<double>());
            sums.add("rft/token_log_prob",
                     masked_sum(scores.log_probs.detach(), part.mask).item<double>());
            sums.add("tokens", tokens);
          });
      sums.reduce(communicator_);
      totals.add_minibatch(sums, optimizer_.step());
    }
  }
  totals.append(metrics, "rft", {"rft/loss"}, {"rft/token_log_prob"});
  append_time_metrics(batch, started, metrics);
  return metrics;
}

}  // namespace cudaagent
