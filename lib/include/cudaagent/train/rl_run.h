// The RL subcommands of cudaagent-train as a library: `rft`, `value` and `ppo` read trajectory
// records (rl_trajectory.h), train in iterations of --batch-size trajectories, write one metrics
// record per iteration to stdout and to RUN/metrics.jsonl (with RUN/metrics.svg, their curves),
// and checkpoint into RUN/checkpoints. A run directory that holds a checkpoint of the same stage
// is resumed: models, optimiser shards, generator state and the data cursor are restored, and
// the run continues as if it had not stopped (the same inputs give the same result). Given other
// inputs (the next rollout batch), a resumed run keeps its models and optimisers and starts at
// the new data's first record. A stop signal ends the run after the current iteration with a
// checkpoint. Data-parallel ranks come from the environment (rl_dist.h).
#pragma once

#include <cstdint>
#include <string>

#include "cudaagent/records/cli.h"
#include "cudaagent/base/session.h"
#include "cudaagent/train/rl_settings.h"

namespace cudaagent {

struct RlRunOptions {
  CommonOptions common;          // inputs, --errors, -q, --max-bad-lines, --max-record-bytes
  std::string run_directory;     // --run
  std::string device = "cpu";    // --device
  // --compute-dtype auto|float32|bfloat16: the dtype of the models' forward and backward products
  // (weights and optimiser state stay float32). auto: bfloat16 for a causal LM on CUDA, else
  // float32; a resumed run keeps the dtype its checkpoint records.
  std::string compute_dtype = "auto";
  int threads = 0;               // --threads; 0: torch's default
  std::uint64_t seed = 1;        // --seed: data order and minibatch shuffling
  int data_epochs = 1;           // --epochs: passes over the input trajectories
  std::int64_t batch_size = 64;  // --batch-size: trajectories per iteration
  bool shuffle_data = true;      // rft/value shuffle the data each pass; ppo keeps file order
  std::int64_t save_every = 0;   // --save-every: iterations between checkpoints (0: at the end)
  std::int64_t stop_after = 0;   // --stop-after: iterations in this invocation (0: no limit)
  int keep_checkpoints = 2;      // --keep-checkpoints (0: all)
  std::string backend;           // --backend gloo|nccl; empty: nccl on CUDA, else gloo
  double dist_timeout_s = 1800;  // --dist-timeout
  std::string loss_aggregation = "token-mean";  // --loss-agg

  std::string model;                        // rft --model, ppo --actor
  std::string critic;                       // value, ppo --critic
  std::string reference;                    // ppo --ref (default: the actor it started from)
  std::string kl_loss_type = "low_var_kl";  // ppo --kl-loss-type
  std::string kl_penalty = "kl";            // ppo --kl-penalty
  std::string old_log_probs = "behaviour";  // ppo --old-log-probs behaviour|recompute
  bool no_whiten = false;                   // ppo --no-whiten
  RftFilter rft_filter;
  bool keep_invalid_calls = false;  // rft --keep-invalid-calls

  PpoSettings ppo;  // also the batching and optimiser of every stage
};

// Add each subcommand's flags (their own and the shared ones) to its CLI11 subcommand.
void add_rft_flags(CLI::App& app, RlRunOptions& options);
void add_value_flags(CLI::App& app, RlRunOptions& options);
void add_ppo_flags(CLI::App& app, RlRunOptions& options);

// Run a stage. Returns kCompleted when the data is used up or --stop-after is reached (or a stop
// signal arrived; run_tool turns that into 128+N), kPipeClosed when stdout's reader went away,
// or a Status when the stage cannot do its job (models, inputs, checkpoints, too many bad lines).
Result<StageEnd> run_rft(RlRunOptions& options, Session& session);
Result<StageEnd> run_value(RlRunOptions& options, Session& session);
Result<StageEnd> run_ppo(RlRunOptions& options, Session& session);

}  // namespace cudaagent
