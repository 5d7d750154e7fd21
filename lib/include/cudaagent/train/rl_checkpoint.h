// Checkpoints of an RL run, so that a stopped run resumes exactly where it stopped: the models,
// each rank's optimiser shard, each rank's torch generator state, and the run's own state (stage,
// iteration, data cursor, KL coefficient, how much of the metrics file belongs to it).
//
// Layout under the run directory:
//   checkpoints/iter-00000012/state.json                 the RunState below (rank 0)
//   checkpoints/iter-00000012/actor/, critic/            TrainableModel::save (rank 0)
//   checkpoints/iter-00000012/optim-<model>.rank-R-of-W.safetensors
//   checkpoints/iter-00000012/rng.rank-R-of-W.safetensors
//   checkpoints/latest                                   the name of the newest complete one
// A checkpoint is written under iter-N.partial and renamed once every rank has written its part,
// and `latest` is replaced atomically after that, so a crash leaves the previous one in force.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/train/policy.h"
#include "cudaagent/train/rl_dist.h"
#include "cudaagent/train/rl_optim.h"

namespace cudaagent {

struct RunState {
  std::string stage;             // "ppo", "value", "rft"
  std::int64_t iteration = 0;    // iterations done
  std::int64_t epoch = 0;        // the data cursor: pass over the data ...
  std::int64_t position = 0;     // ... and trajectories consumed in it
  std::string data_fingerprint;  // SHA-256 of the input records, in order
  std::uint64_t seed = 1;
  double kl_coef = 0.0;             // the (adaptive) KL-in-reward coefficient
  std::uint64_t metrics_bytes = 0;  // length of metrics.jsonl when the checkpoint was taken
  int world_size = 1;
  std::string reference_spec;  // ppo: the frozen reference model (for resuming)
  // The models' compute dtype ("float32", "bfloat16"); checkpoints from before it existed were
  // float32 runs.
  std::string compute_dtype = "float32";
};

// What one checkpoint holds, by name: models saved by rank 0 and optimisers saved per rank.
struct CheckpointParts {
  std::vector<std::pair<std::string, const TrainableModel*>> models;  // "actor", "critic"
  std::vector<std::pair<std::string, const AdamW*>> optimizers;
};

// Writes checkpoint `state.iteration` of `run_directory` collectively (every rank calls it) and
// keeps only the newest `keep` checkpoints (0: all). Returns the checkpoint's directory.
Result<std::string> write_checkpoint(const std::string& run_directory, const RunState& state,
                                     const CheckpointParts& parts, Communicator& communicator,
                                     int keep);

// The newest complete checkpoint's directory, or nullopt when the run has none.
std::optional<std::string> latest_checkpoint(const std::string& run_directory);

// Reads state.json of a checkpoint directory.
Result<RunState> read_run_state(const std::string& checkpoint_directory);

// Restores this rank's optimiser shard `name` and generator state from a checkpoint directory.
Status restore_optimizer(const std::string& checkpoint_directory, const std::string& name,
                         AdamW& optimizer, const Communicator& communicator);
Status restore_generator(const std::string& checkpoint_directory, const Communicator& communicator);

}  // namespace cudaagent
