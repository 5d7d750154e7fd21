// The three trainers, each one iteration at a time over trajectories already read:
//   PpoTrainer    actor and critic from scored trajectories with behaviour log-probs: critic
//                 values, optional reference KL (in the reward or as a loss), masked GAE, then
//                 PPO epochs of minibatch updates (clipped surrogate with dual clip, clipped value
//                 loss), single- or multi-turn alike (the loss mask carries the turns);
//   ValueTrainer  the critic alone on GAE targets (value pre-training, actor frozen);
//   RftTrainer    masked next-token cross-entropy on trajectories kept by the rft filters.
// Minibatches are split across ranks and into micro-batches; every loss is normalised by the
// whole minibatch's token count, so the summed gradients equal the minibatch's whatever the split.
// Not thread-safe; one trainer per process.
#pragma once

#include <cstdint>
#include <vector>

#include "cudaagent/train/policy.h"
#include "cudaagent/train/rl_batch.h"
#include "cudaagent/train/rl_math.h"
#include "cudaagent/train/rl_metrics.h"
#include "cudaagent/train/rl_optim.h"

namespace cudaagent {

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

class PpoTrainer {
 public:
  // The models must outlive the trainer; `reference` may be null unless settings need it.
  PpoTrainer(PolicyModel& actor, ValueModel& critic, PolicyModel* reference,
             const PpoSettings& settings, Communicator& communicator);
  // One rollout batch: every rank passes the same trajectories (with behaviour log-probs).
  MetricList iteration(const std::vector<const Trajectory*>& batch, std::int64_t iteration);

  AdamW& actor_optimizer() { return actor_optimizer_; }
  AdamW& critic_optimizer() { return critic_optimizer_; }
  KlController& kl_controller() { return kl_; }

 private:
  PolicyModel& actor_;
  ValueModel& critic_;
  PolicyModel* reference_;
  PpoSettings settings_;
  Communicator& communicator_;
  AdamW actor_optimizer_;
  AdamW critic_optimizer_;
  KlController kl_;
};

struct ValueSettings {
  double gamma = 1.0;
  double lambda = 1.0;
  double cliprange_value = 0.5;
  LossAggregation aggregation = LossAggregation::kTokenMean;
  Batching batching;
  OptimizerSettings optimizer;
};

class ValueTrainer {
 public:
  ValueTrainer(ValueModel& critic, const ValueSettings& settings, Communicator& communicator);
  MetricList iteration(const std::vector<const Trajectory*>& batch, std::int64_t iteration);
  AdamW& optimizer() { return optimizer_; }

 private:
  ValueModel& critic_;
  ValueSettings settings_;
  Communicator& communicator_;
  AdamW optimizer_;
};

struct RftSettings {
  LossAggregation aggregation = LossAggregation::kTokenMean;
  Batching batching;
  OptimizerSettings optimizer;
};

class RftTrainer {
 public:
  RftTrainer(PolicyModel& model, const RftSettings& settings, Communicator& communicator);
  MetricList iteration(const std::vector<const Trajectory*>& batch, std::int64_t iteration);
  AdamW& optimizer() { return optimizer_; }

 private:
  PolicyModel& model_;
  RftSettings settings_;
  Communicator& communicator_;
  AdamW optimizer_;
};

}  // namespace cudaagent
