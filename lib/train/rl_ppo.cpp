// One PPO iteration: the forward-only passes (critic values, reference and recomputed log-probs)
// shared across ranks, rewards and masked GAE on the CPU, then minibatch updates of the actor and
// the critic. Statistics are summed per rank as token-weighted numerators and reduced once per
// minibatch, so metrics are those of the whole minibatch on every rank.
#include "cudaagent/train/rl_ppo.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "rl_update.h"

namespace cudaagent {

PpoTrainer::PpoTrainer(PolicyModel& actor, ValueModel& critic, PolicyModel* reference,
                       const PpoSettings& settings, Communicator& communicator)
    : actor_(actor),
      critic_(critic),
      reference_(reference),
      settings_(settings),
      communicator_(communicator),
      actor_optimizer_(actor.parameters(), actor.parameter_names(), settings.actor_optimizer,
                       communicator),
      critic_optimizer_(critic.parameters(), critic.parameter_names(), settings.critic_optimizer,
                        communicator) {
  kl_.value = settings.kl_reward_coef;
  kl_.adaptive = settings.kl_adaptive;
  kl_.target = settings.kl_target;
  kl_.horizon = settings.kl_horizon;
}

MetricList PpoTrainer::iteration(const std::vector<const Trajectory*>& trajectories,
                                 std::int64_t iteration) {
  const auto started = std::chrono::steady_clock::now();
  RlBatch batch = collate(trajectories);
  const auto& batching = settings_.batching;
  MetricList metrics;

  // Forward-only passes.
  batch.values =
      compute_per_token(batch, batching.micro_batch_size, communicator_,
                        [&](const RlBatch& part) { return critic_.values(part.tokens); });
  if (settings_.needs_reference()) {
    batch.ref_log_probs = compute_per_token(
        batch, batching.micro_batch_size, communicator_, [&](const RlBatch& part) {
          return reference_->score_response(part.tokens, false).log_probs;
        });
  }
  if (settings_.recompute_old_log_probs || !batch.old_log_probs.defined()) {
    const auto recompute_started = std::chrono::steady_clock::now();
    at::Tensor recomputed = compute_per_token(
        batch, batching.micro_batch_size, communicator_,
        [&](const RlBatch& part) { return actor_.score_response(part.tokens, false).log_probs; });
    if (batch.old_log_probs.defined()) {
      metrics.emplace_back(
          "actor/behaviour_logprob_gap",
          masked_mean((recomputed - batch.old_log_probs).abs(), batch.mask).item<double>());
    }
    batch.old_log_probs = recomputed;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - recompute_started).count();
    metrics.emplace_back("perf/old_log_prob_s", seconds);
    metrics.emplace_back(
        "perf/old_log_prob_tokens_per_s",
        seconds > 0 ? batch.tokens.attention_mask.sum().item<double>() / seconds : 0.0);
  }

  // Rewards, KL in the reward, advantages.
  at::Tensor rewards = outcome_rewards(batch.scores, batch.mask);
  if (settings_.kl_reward_coef > 0) {
    at::Tensor kld =
        kl_penalty(batch.old_log_probs, batch.ref_log_probs, settings_.kl_reward_type) * batch.mask;
    // veRL's current_kl: the mean over rows of each row's masked token mean.
    const double current_kl =
        (kld.sum(-1) / batch.mask.sum(-1).clamp_min(1.0)).mean().item<double>();
    rewards = rewards - kl_.value * kld;
    metrics.emplace_back("actor/reward_kl_penalty", current_kl);
    metrics.emplace_back("actor/reward_kl_penalty_coeff", kl_.value);
    kl_.update(current_kl, static_cast<double>(batch.rows()));
  }
  auto gae = compute_gae(rewards, batch.values, batch.mask, settings_.gamma, settings_.lambda,
                         settings_.whiten_advantages);
  batch.advantages = gae.advantages;
  batch.returns = gae.returns;
  append_data_metrics(batch, rewards, metrics);

  // Updates.
  const auto update_started = std::chrono::steady_clock::now();
  const bool update_actor = iteration >= settings_.critic_warmup;
  UpdateTotals actor_totals;
  UpdateTotals critic_totals;
  bool first_minibatch = true;
  for (int epoch = 0; epoch < batching.epochs; ++epoch) {
    for (const auto& minibatch : minibatches(batch.rows(), batching, iteration, epoch)) {
      const LossNormaliser normaliser = minibatch_normaliser(batch, minibatch);
      UpdateSums actor_sums({"actor/pg_loss", "actor/entropy", "actor/kl_loss", "actor/pg_clipfrac",
                             "actor/pg_clipfrac_lower", "actor/ppo_kl", "tokens"},
                            {"actor/ratio_max_deviation"});
      UpdateSums critic_sums(
          {"critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "tokens"}, {});
      for_each_micro_batch(
          batch, minibatch, batching.micro_batch_size, communicator_, actor_.device(),
          [&](const RlBatch& part) {
            if (update_actor) {
              ResponseScores scores = actor_.score_response(part.tokens, true);
              PolicyLossTerms terms =
                  policy_loss(part.old_log_probs, scores.log_probs, part.advantages, part.mask,
                              settings_.policy, normaliser);
              at::Tensor loss = terms.loss;
              at::Tensor entropy = aggregate_loss(scores.entropy, part.mask,
                                                  settings_.policy.aggregation, normaliser);
              if (settings_.entropy_coef != 0) loss = loss - settings_.entropy_coef * entropy;
              if (settings_.kl_loss_coef > 0) {
                at::Tensor kl = aggregate_loss(
                    kl_penalty(scores.log_probs, part.ref_log_probs, settings_.kl_loss_type),
                    part.mask, settings_.policy.aggregation, normaliser);
                loss = loss + settings_.kl_loss_coef * kl;
                actor_sums.add("actor/kl_loss", kl.item<double>());
              }
              loss.backward();
              const double tokens = part.mask.sum().item<double>();
              actor_sums.add("actor/pg_loss", terms.loss.item<double>());
              actor_sums.add("actor/entropy", entropy.item<double>());
              actor_sums.add("actor/pg_clipfrac", terms.clip_fraction.item<double>() * tokens);
              actor_sums.add("actor/pg_clipfrac_lower",
                             terms.clip_fraction_lower.item<double>() * tokens);
              actor_sums.add("actor/ppo_kl", terms.approx_kl.item<double>() * tokens);
              actor_sums.add("tokens", tokens);
              at::Tensor deviation = ((terms.ratio - 1.0).abs() * part.mask).max();
              actor_sums.max("actor/ratio_max_deviation", deviation.item<double>());
            }
            at::Tensor predicted = critic_.values(part.tokens);
            ValueLossTerms value =
                value_loss(predicted, part.returns, part.values, part.mask,
                           settings_.cliprange_value, settings_.policy.aggregation, normaliser);
            value.loss.backward();
            const double tokens = part.mask.sum().item<double>();
            critic_sums.add("critic/vf_loss", value.loss.item<double>());
            critic_sums.add("critic/vf_clipfrac", value.clip_fraction.item<double>() * tokens);
            critic_sums.add("critic/vpred_mean",
                            masked_mean(predicted.detach(), part.mask).item<double>() * tokens);
            critic_sums.add("tokens", tokens);
          });
      actor_sums.reduce(communicator_);
      critic_sums.reduce(communicator_);
      if (update_actor) {
        StepReport report = actor_optimizer_.step();
        actor_totals.add_minibatch(actor_sums, report);
        if (first_minibatch) {
          metrics.emplace_back("actor/first_minibatch/ratio_max_deviation",
                               actor_sums.maximum("actor/ratio_max_deviation"));
          metrics.emplace_back("actor/first_minibatch/pg_clipfrac",
                               actor_sums.sum("actor/pg_clipfrac") / actor_sums.sum("tokens"));
        }
      }
      StepReport report = critic_optimizer_.step();
      critic_totals.add_minibatch(critic_sums, report);
      first_minibatch = false;
    }
  }
  std::vector<std::string> actor_means{"actor/pg_loss", "actor/entropy"};
  if (settings_.kl_loss_coef > 0) actor_means.emplace_back("actor/kl_loss");
  actor_totals.append(metrics, "actor", actor_means,
                      {"actor/pg_clipfrac", "actor/pg_clipfrac_lower", "actor/ppo_kl"});
  critic_totals.append(metrics, "critic", {"critic/vf_loss"},
                       {"critic/vf_clipfrac", "critic/vpred_mean"});
  const double update_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - update_started).count();
  const double batch_tokens = batch.tokens.attention_mask.sum().item<double>();
  metrics.emplace_back("perf/update_s", update_seconds);
  metrics.emplace_back("perf/update_tokens_per_s",
                       update_seconds > 0 ? batch_tokens * batching.epochs / update_seconds : 0.0);
  append_time_metrics(batch, started, metrics);
  return metrics;
}

}  // namespace cudaagent
