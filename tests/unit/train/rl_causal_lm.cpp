// The RL stages on the real model (train::CausalLm through rl_causal_lm.cpp) with the tiny Qwen2
// fixture: the response window lines up with CausalLm's own next-token scores, a PPO iteration
// moves the weights and raises the log-probs of the rewarded responses against the others, and
// actor and critic survive a save and load exactly.
#include <ATen/ATen.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "cudaagent/train/causal_lm.h"
#include "cudaagent/train/rl_batch.h"
#include "cudaagent/train/rl_dist.h"
#include "cudaagent/train/rl_models.h"
#include "cudaagent/train/rl_ppo.h"
#include "fixtures.h"
#include "rl_toy_env.h"

using namespace cudaagent;

namespace {

const c10::Device kCpu(c10::kCPU);

std::string tiny_qwen() { return cudaagent::testing::train_fixture("qwen2-tiny"); }

std::vector<const Trajectory*> pointers(const std::vector<Trajectory>& items) {
  std::vector<const Trajectory*> out;
  for (const auto& item : items) out.push_back(&item);
  return out;
}

// Rows of different prompt and response lengths (so the batch has left and right padding), half
// of them rewarded.
std::vector<Trajectory> mixed_trajectories() {
  std::vector<Trajectory> out;
  for (int i = 0; i < 8; ++i) {
    auto one = cudaagent::testing::random_trajectories(1, 3 + i % 3, 5 + i % 4, 1, 2050,
                                                       static_cast<std::uint64_t>(100 + i));
    one[0].reward = i % 2 == 0 ? 1.0 : 0.0;
    out.push_back(std::move(one[0]));
  }
  return out;
}

// Mean log-prob over the model tokens of the rows with reward `reward`.
double mean_log_prob(PolicyModel& model, const std::vector<Trajectory>& trajectories, double reward) {
  at::NoGradGuard no_grad;
  RlBatch batch = collate(pointers(trajectories));
  at::Tensor log_probs = model.score_response(batch.tokens, false).log_probs;
  at::Tensor rows = (batch.scores == reward).to(at::kFloat).unsqueeze(1);
  at::Tensor mask = batch.mask * rows;
  return (log_probs * mask).sum().item<double>() / mask.sum().item<double>();
}

std::vector<at::Tensor> snapshot(TrainableModel& model) {
  std::vector<at::Tensor> out;
  for (const auto& p : model.parameters()) out.push_back(p.detach().clone());
  return out;
}

}  // namespace

TEST_CASE("the real model's response scores are CausalLm's next-token scores of those tokens") {
  auto policy = load_policy_model(tiny_qwen(), kCpu);
  REQUIRE(policy);
  CHECK(policy.value()->vocab_size() == 2050);
  CHECK(policy.value()->parameters().size() == policy.value()->parameter_names().size());
  auto trajectories = cudaagent::testing::random_trajectories(1, 4, 6, 1, 2050, 3);
  RlBatch batch = collate(pointers(trajectories));
  at::NoGradGuard no_grad;
  ResponseScores scores = policy.value()->score_response(batch.tokens, true);
  train::ModelOptions options;
  auto model = train::CausalLm::load(tiny_qwen(), options);
  REQUIRE(model);
  // One unpadded row: response token j is output column 4 - 1 + j.
  train::TokenScores direct = model.value()->score_next_tokens(batch.tokens.input_ids);
  CHECK(at::allclose(scores.log_probs, direct.logprobs.narrow(1, 3, 6), 1e-5, 1e-6));
  CHECK(at::allclose(scores.entropy, direct.entropy.narrow(1, 3, 6), 1e-5, 1e-6));
  CHECK((scores.log_probs < 0).all().item<bool>());
}

TEST_CASE("PPO on the tiny Qwen2 raises the rewarded responses' log-probs; checkpoints round trip") {
  auto actor = load_policy_model(tiny_qwen(), kCpu);
  auto critic = load_value_model(tiny_qwen(), kCpu);
  REQUIRE(actor);
  REQUIRE(critic);
  std::vector<Trajectory> trajectories = mixed_trajectories();
  {
    // A new value head is zero: the critic's first values are 0 everywhere.
    at::NoGradGuard no_grad;
    RlBatch batch = collate(pointers(trajectories));
    CHECK(critic.value()->values(batch.tokens).abs().max().item<double>() == 0.0);
  }
  const double rewarded_before = mean_log_prob(*actor.value(), trajectories, 1.0);
  const double other_before = mean_log_prob(*actor.value(), trajectories, 0.0);
  const auto weights_before = snapshot(*actor.value());

  PpoSettings settings;
  settings.recompute_old_log_probs = true;  // the random trajectories' log-probs are not the model's
  settings.batching.micro_batch_size = 4;
  settings.actor_optimizer.lr = 1e-3;
  settings.actor_optimizer.weight_decay = 0.0;
  settings.critic_optimizer.lr = 1e-3;
  auto communicator = make_local_communicator();
  PpoTrainer trainer(*actor.value(), *critic.value(), nullptr, settings, *communicator);
  for (int i = 0; i < 3; ++i) trainer.iteration(pointers(trajectories), i);

  const double rewarded_after = mean_log_prob(*actor.value(), trajectories, 1.0);
  const double other_after = mean_log_prob(*actor.value(), trajectories, 0.0);
  MESSAGE("rewarded " << rewarded_before << " -> " << rewarded_after << ", other " << other_before
                      << " -> " << other_after);
  CHECK(rewarded_after > rewarded_before);
  CHECK(other_after < other_before);
  const auto weights_after = snapshot(*actor.value());
  int changed = 0;
  for (std::size_t i = 0; i < weights_after.size(); ++i) {
    changed += at::equal(weights_before[i], weights_after[i]) ? 0 : 1;
  }
  CHECK(changed == static_cast<int>(weights_after.size()));

  // Save and load: the same scores and values, and a directory a server can load (tokenizer and
  // chat template copied from the source checkpoint).
  const auto scratch = std::filesystem::temp_directory_path() /
                       ("cudaagent-rl-causal-lm-" + std::to_string(::getpid()));
  std::filesystem::remove_all(scratch);
  std::filesystem::create_directories(scratch);
  REQUIRE(actor.value()->save((scratch / "actor").string()));
  REQUIRE(critic.value()->save((scratch / "critic").string()));
  CHECK(std::filesystem::exists(scratch / "actor" / "tokenizer.json"));
  CHECK(std::filesystem::exists(scratch / "critic" / "value_head.safetensors"));
  auto actor_again = load_policy_model((scratch / "actor").string(), kCpu);
  auto critic_again = load_value_model((scratch / "critic").string(), kCpu);
  REQUIRE(actor_again);
  REQUIRE(critic_again);
  {
    at::NoGradGuard no_grad;
    RlBatch batch = collate(pointers(trajectories));
    CHECK(at::equal(actor.value()->score_response(batch.tokens, false).log_probs,
                    actor_again.value()->score_response(batch.tokens, false).log_probs));
    at::Tensor values = critic.value()->values(batch.tokens);
    CHECK(values.abs().max().item<double>() > 0.0);  // the head trained, and was saved
    CHECK(at::equal(values, critic_again.value()->values(batch.tokens)));
  }
  std::filesystem::remove_all(scratch);
}
