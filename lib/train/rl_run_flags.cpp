// The flags of the RL subcommands. Defaults live in RlRunOptions and its settings structs
// (veRL's defaults where veRL has one), except where a stage's default differs, set here.
#include "cudaagent/train/rl_run.h"

#include <CLI/CLI.hpp>

namespace cudaagent {
namespace {

void add_shared_flags(CLI::App& app, RlRunOptions& options) {
  app.add_option("input", options.common.inputs, "Trajectory JSONL files ('-' or none: stdin)")
      ->type_name("FILE");
  app.add_option("--errors", options.common.errors,
                 "Write error records for unusable trajectories to FILE instead of stdout")
      ->type_name("FILE");
  app.add_flag("-q,--quiet", options.common.quiet, "No progress or summary on stderr");
  app.add_option("--max-bad-lines", options.common.max_bad_lines,
                 "Fail (exit 1) after more malformed lines than this; negative: no limit")
      ->capture_default_str();
  app.add_option("--max-record-bytes", options.common.max_record_bytes,
                 "Longest accepted record in bytes; longer lines become error records")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{2}, std::uint64_t{1} << 34));
  app.add_option("--run", options.run_directory,
                 "Run directory: checkpoints, metrics.jsonl, metrics.svg (resumed when it holds a "
                 "checkpoint of this stage)")
      ->type_name("DIR")
      ->required();
  app.add_option("--device", options.device, "Where the models train: cpu, cuda, cuda:N")
      ->capture_default_str();
  app.add_option("--compute-dtype", options.compute_dtype,
                 "Dtype of the models' forward and backward: float32, bfloat16 (float32 weights "
                 "and optimiser state either way), or auto: bfloat16 for a causal LM on CUDA, "
                 "else float32. A resumed run keeps its checkpoint's")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "float32", "bfloat16"}));
  app.add_option("--threads", options.threads, "CPU threads for torch (0: torch's default)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--seed", options.seed, "Seed of the data order and minibatch shuffling")
      ->capture_default_str();
  app.add_option("--epochs", options.data_epochs, "Passes over the input trajectories")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--batch-size", options.batch_size, "Trajectories per iteration")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  app.add_option("--micro-batch-size", options.ppo.batching.micro_batch_size,
                 "Trajectories per forward and backward pass on one rank")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  app.add_option("--loss-agg", options.loss_aggregation,
                 "Loss aggregation: token-mean, seq-mean-token-sum, seq-mean-token-mean")
      ->capture_default_str()
      ->check(CLI::IsMember({"token-mean", "seq-mean-token-sum", "seq-mean-token-mean"}));
  app.add_option("--weight-decay", options.ppo.actor_optimizer.weight_decay, "AdamW weight decay")
      ->capture_default_str();
  app.add_option("--grad-clip", options.ppo.actor_optimizer.grad_clip,
                 "Largest global gradient norm (0: no clipping)")
      ->capture_default_str();
  app.add_option("--warmup-steps", options.ppo.actor_optimizer.warmup_steps,
                 "Optimiser steps of linear learning-rate warm-up")
      ->capture_default_str();
  app.add_option("--save-every", options.save_every,
                 "Iterations between checkpoints (0: only at the end)")
      ->capture_default_str();
  app.add_option(
         "--stop-after", options.stop_after,
         "Stop after this many iterations of this invocation, with a checkpoint (0: no limit)")
      ->capture_default_str();
  app.add_option("--keep-checkpoints", options.keep_checkpoints,
                 "Checkpoints to keep, newest first (0: all)")
      ->capture_default_str();
  app.add_option("--backend", options.backend,
                 "Data-parallel backend: gloo or nccl (default: nccl on CUDA, else gloo)")
      ->check(CLI::IsMember({"gloo", "nccl"}));
  app.add_option("--dist-timeout", options.dist_timeout_s,
                 "Seconds a rank waits for the others before failing")
      ->capture_default_str();
}

}  // namespace

void add_rft_flags(CLI::App& app, RlRunOptions& options) {
  options.ppo.actor_optimizer.lr = 1e-5;
  add_shared_flags(app, options);
  app.add_option("--model", options.model,
                 "The model to fine-tune: a checkpoint directory or toy:...")
      ->required();
  app.add_option("--lr", options.ppo.actor_optimizer.lr, "Learning rate")->capture_default_str();
  app.add_option("--min-reward", options.rft_filter.min_reward,
                 "Keep trajectories whose reward is above this")
      ->capture_default_str();
  app.add_option("--max-identical-calls", options.rft_filter.max_identical_calls,
                 "Drop trajectories with this many identical consecutive tool calls (0: keep)")
      ->capture_default_str();
  app.add_flag("--keep-invalid-calls", options.keep_invalid_calls,
               "Keep trajectories that made invalid tool calls");
}

void add_value_flags(CLI::App& app, RlRunOptions& options) {
  options.ppo.actor_optimizer.lr = 1e-5;
  add_shared_flags(app, options);
  app.add_option("--critic", options.critic,
                 "The critic: a value checkpoint, or a causal LM (its trunk and a new value head)")
      ->required();
  app.add_option("--lr", options.ppo.actor_optimizer.lr, "Learning rate")->capture_default_str();
  app.add_option("--cliprange-value", options.ppo.cliprange_value, "Value clipping range")
      ->capture_default_str();
  app.add_option("--gamma", options.ppo.gamma, "Discount")->capture_default_str();
  app.add_option("--lambda", options.ppo.lambda, "GAE lambda")->capture_default_str();
}

void add_ppo_flags(CLI::App& app, RlRunOptions& options) {
  options.shuffle_data = false;
  add_shared_flags(app, options);
  app.add_option("--actor", options.model, "The actor: a checkpoint directory or toy:...")
      ->required();
  app.add_option("--critic", options.critic,
                 "The critic: a value checkpoint, or a causal LM (its trunk and a new value head)")
      ->required();
  app.add_option("--ref", options.reference,
                 "The frozen reference for KL terms (default: the actor the run started from)");
  app.add_option("--actor-lr", options.ppo.actor_optimizer.lr, "Actor learning rate")
      ->capture_default_str();
  app.add_option("--critic-lr", options.ppo.critic_optimizer.lr, "Critic learning rate")
      ->capture_default_str();
  app.add_option("--mini-batch-size", options.ppo.batching.mini_batch_size,
                 "Trajectories per optimiser step (0: the whole batch)")
      ->capture_default_str();
  app.add_option("--ppo-epochs", options.ppo.batching.epochs, "Passes over each batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_flag("--shuffle-minibatches", options.ppo.batching.shuffle,
               "Shuffle each batch before cutting minibatches");
  app.add_option("--clip-ratio-low", options.ppo.policy.clip_low, "Ratio clipped below at 1 - this")
      ->capture_default_str();
  app.add_option("--clip-ratio-high", options.ppo.policy.clip_high,
                 "Ratio clipped above at 1 + this")
      ->capture_default_str();
  app.add_option("--clip-ratio-c", options.ppo.policy.clip_c,
                 "Dual clip: negative-advantage losses are capped at -A times this (> 1)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--cliprange-value", options.ppo.cliprange_value, "Value clipping range")
      ->capture_default_str();
  app.add_option("--entropy-coef", options.ppo.entropy_coef, "Entropy bonus coefficient")
      ->capture_default_str();
  app.add_option("--kl-loss-coef", options.ppo.kl_loss_coef,
                 "KL-to-reference loss coefficient (0: off)")
      ->capture_default_str();
  app.add_option("--kl-loss-type", options.kl_loss_type,
                 "KL estimator of the loss: k1/kl, abs, k2/mse, k3/low_var_kl")
      ->capture_default_str();
  app.add_option("--kl-coef", options.ppo.kl_reward_coef, "KL penalty in the reward (0: off)")
      ->capture_default_str();
  app.add_option("--kl-penalty", options.kl_penalty, "KL estimator of the reward penalty")
      ->capture_default_str();
  app.add_option("--kl-target", options.ppo.kl_target,
                 "Target KL of the adaptive controller (set: the coefficient adapts)")
      ->capture_default_str()
      ->each([&](const std::string&) { options.ppo.kl_adaptive = true; });
  app.add_option("--kl-horizon", options.ppo.kl_horizon, "Horizon of the adaptive KL controller")
      ->capture_default_str();
  app.add_option("--gamma", options.ppo.gamma, "Discount")->capture_default_str();
  app.add_option("--lambda", options.ppo.lambda, "GAE lambda")->capture_default_str();
  app.add_flag("--no-whiten", options.no_whiten, "Do not whiten advantages");
  app.add_option("--old-log-probs", options.old_log_probs,
                 "Old policy of the ratio: behaviour (the sampler's log-probs) or recompute")
      ->capture_default_str()
      ->check(CLI::IsMember({"behaviour", "recompute"}));
  app.add_option("--critic-warmup", options.ppo.critic_warmup,
                 "Iterations that train the critic only")
      ->capture_default_str();
}

}  // namespace cudaagent
