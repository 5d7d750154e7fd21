// A toy environment for the RL tests: episodes sampled from the toy model (token by token, with the
// sampler's log-probabilities, optionally several turns with observation tokens between them) and
// scored by a pattern reward, plus random synthetic trajectories and a writer of trajectory
// records in cudaagent-rollout's format. Shared by the unit tests and the test generator program.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cudaagent/train/rl_models.h"
#include "cudaagent/train/rl_trajectory.h"

namespace cudaagent::testing {

struct ToyEpisodes {
  int rows = 32;
  int prompt_min = 2;
  int prompt_max = 4;
  int turns = 1;               // model turns
  int model_tokens = 6;        // tokens the model writes per turn
  int observation_tokens = 2;  // tokens the environment inserts between turns (loss mask 0)
};

// The pattern: every model token should be the previous token plus one (mod vocab). The reward
// is the fraction of model tokens that follow it; observation tokens are not scored but count as
// the "previous token" of the model token after them.
double pattern_reward(const Trajectory& trajectory, std::int64_t vocab);

// Samples episodes from `model` (no gradients) with `generator`; ids "<prefix><n>".
std::vector<Trajectory> sample_episodes(ToyPolicyModel& model, const ToyEpisodes& spec,
                                        at::Generator& generator, const std::string& prefix = "t");

// Random trajectories of the given sizes for throughput tests and benches: token ids below
// `vocab`, log-probs in [-3, 0), a loss mask with observation spans when turns > 1, random
// rewards in {-1, 1, 2, 3}.
std::vector<Trajectory> random_trajectories(int rows, int prompt_length, int response_length,
                                            int turns, std::int64_t vocab, std::uint64_t seed);

// One '\n'-terminated trajectory record: id, trajectory{prompt_ids, response_ids, loss_mask,
// logprobs, finish_reason, turns[{tool_calls}]}, reward{value}.
void append_trajectory_record(std::string& out, const Trajectory& trajectory);

}  // namespace cudaagent::testing
