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
#include "cudaagent/train/rl_settings.h"

namespace cudaagent {

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
