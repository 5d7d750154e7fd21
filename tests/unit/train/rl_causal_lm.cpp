// The RL stages on the real model (train::CausalLm through rl_causal_lm.cpp) with the tiny Qwen2
// fixture: the response window lines up with CausalLm's own next-token scores, a PPO iteration
// moves the weights and raises the log-probs of the rewarded responses against the others, and
// actor and critic survive a save and load exactly. In mixed precision (float32 parameters,
// bfloat16 products) the scores and gradients stay close to float32's, the three stages move the
// model the same way, and checkpoints stay float32.
#include <ATen/ATen.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "cudaagent/train/causal_lm.h"
#include "cudaagent/train/rl_batch.h"
#include "cudaagent/train/rl_dist.h"
#include "cudaagent/train/rl_models.h"
#include "cudaagent/train/rl_ppo.h"
#include "cudaagent/train/safetensors.h"
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

// Mixed precision (--compute-dtype bfloat16): float32 parameters whose products run in bfloat16.

namespace {

// Every tensor of a saved model directory's safetensors is float32.
bool all_float32(const std::string& directory, const std::string& file = "") {
  auto checkpoint = train::Checkpoint::open(file.empty() ? directory : directory + "/" + file);
  if (!checkpoint) return false;
  for (const auto& name : checkpoint.value().names()) {
    if (checkpoint.value().find(name)->info->dtype != train::DType::kF32) return false;
  }
  return !checkpoint.value().names().empty();
}

double cosine(const at::Tensor& a, const at::Tensor& b) {
  const auto x = a.reshape({-1}).to(at::kDouble), y = b.reshape({-1}).to(at::kDouble);
  return (x.dot(y) / (x.norm() * y.norm())).item<double>();
}

// Trains a fresh actor (and critic) with `stage` in `compute`; returns the mean log-prob of the
// rewarded rows and of the others, before and after, and checks what the trained models are.
struct Moves {
  double rewarded_before, rewarded_after, other_before, other_after;
};
Moves train_stage(const std::string& stage, c10::ScalarType compute, const std::filesystem::path& scratch) {
  auto actor = load_policy_model(tiny_qwen(), kCpu, compute);
  auto critic = load_value_model(tiny_qwen(), kCpu, compute);
  REQUIRE(actor);
  REQUIRE(critic);
  std::vector<Trajectory> trajectories = mixed_trajectories();
  Moves moves{mean_log_prob(*actor.value(), trajectories, 1.0), 0, mean_log_prob(*actor.value(), trajectories, 0.0), 0};
  auto communicator = make_local_communicator();
  if (stage == "ppo") {
    PpoSettings settings;
    settings.recompute_old_log_probs = true;
    settings.batching.micro_batch_size = 4;
    settings.actor_optimizer.lr = 1e-3;
    settings.actor_optimizer.weight_decay = 0.0;
    settings.critic_optimizer.lr = 1e-3;
    PpoTrainer trainer(*actor.value(), *critic.value(), nullptr, settings, *communicator);
    for (int i = 0; i < 3; ++i) trainer.iteration(pointers(trajectories), i);
  } else if (stage == "rft") {
    RftSettings settings;  // fine-tuned on the rewarded rows only, as rft's filter keeps them
    settings.batching.micro_batch_size = 4;
    settings.optimizer.lr = 1e-3;
    RftTrainer trainer(*actor.value(), settings, *communicator);
    std::vector<const Trajectory*> kept;
    for (const auto& t : trajectories) {
      if (t.reward > 0) kept.push_back(&t);
    }
    for (int i = 0; i < 3; ++i) trainer.iteration(kept, i);
  } else {
    ValueSettings settings;
    settings.batching.micro_batch_size = 4;
    settings.optimizer.lr = 1e-3;
    ValueTrainer trainer(*critic.value(), settings, *communicator);
    for (int i = 0; i < 3; ++i) trainer.iteration(pointers(trajectories), i);
    // The critic's values take the place of log-probs: rewarded rows' values rise above the rest.
    at::NoGradGuard no_grad;
    RlBatch batch = collate(pointers(trajectories));
    const at::Tensor values = critic.value()->values(batch.tokens);
    const at::Tensor rewarded = (batch.scores == 1.0).to(at::kFloat).unsqueeze(1) * batch.mask;
    const at::Tensor other = (batch.scores == 0.0).to(at::kFloat).unsqueeze(1) * batch.mask;
    moves = {0, ((values * rewarded).sum() / rewarded.sum()).item<double>(), 0,
             ((values * other).sum() / other.sum()).item<double>()};
  }
  if (stage != "value") {
    moves.rewarded_after = mean_log_prob(*actor.value(), trajectories, 1.0);
    moves.other_after = mean_log_prob(*actor.value(), trajectories, 0.0);
  }
  for (const auto& p : actor.value()->parameters()) CHECK((p.scalar_type() == at::kFloat));
  for (const auto& p : critic.value()->parameters()) CHECK((p.scalar_type() == at::kFloat));
  const auto directory = scratch / (stage + "-" + compute_dtype_name(compute));
  REQUIRE(actor.value()->save((directory / "actor").string()));
  REQUIRE(critic.value()->save((directory / "critic").string()));
  CHECK(all_float32((directory / "actor").string()));
  CHECK(all_float32((directory / "critic").string()));
  CHECK(all_float32((directory / "critic").string(), "value_head.safetensors"));
  return moves;
}

}  // namespace

TEST_CASE("CausalLm in mixed precision: float32 parameters, bfloat16 products, float32 gradients") {
  train::ModelOptions full;
  full.trainable = true;
  train::ModelOptions mixed = full;
  mixed.compute_dtype = "bfloat16";
  auto a = train::CausalLm::load(tiny_qwen(), full);
  auto b = train::CausalLm::load(tiny_qwen(), mixed);
  REQUIRE(a);
  REQUIRE(b);
  CHECK((b.value()->dtype() == at::kFloat));
  CHECK((b.value()->compute_dtype() == at::kBFloat16));
  CHECK((a.value()->compute_dtype() == at::kFloat));
  const std::vector<Trajectory> trajectories = mixed_trajectories();  // padded on both sides
  RlBatch batch = collate(pointers(trajectories));
  train::ScoreOptions options;
  options.forward.position_ids = batch.tokens.position_ids;
  options.forward.attention_mask = batch.tokens.attention_mask;
  std::vector<std::vector<at::Tensor>> grads;
  std::vector<at::Tensor> logprobs;
  for (auto* model : {a.value().get(), b.value().get(), b.value().get()}) {
    options.forward.recompute = grads.size() == 2;  // the mixed model with and without recomputation
    const train::TokenScores scores = model->score_next_tokens(batch.tokens.input_ids, options);
    CHECK((scores.logprobs.scalar_type() == at::kFloat));
    CHECK((scores.entropy.scalar_type() == at::kFloat));
    logprobs.push_back(scores.logprobs.detach());
    (scores.logprobs.sum() + scores.entropy.sum()).backward();
    std::vector<at::Tensor> g;
    for (auto& p : model->parameters()) {
      REQUIRE(p.grad().defined());
      CHECK((p.grad().scalar_type() == at::kFloat));
      g.push_back(p.grad().clone());
      p.mutable_grad() = at::Tensor();
    }
    grads.push_back(std::move(g));
  }
  // bfloat16 rounding shows (so the products did run in it) but stays small.
  const double difference = (logprobs[0] - logprobs[1]).abs().max().item<double>();
  MESSAGE("largest log-prob difference, float32 vs bfloat16 products: " << difference);
  CHECK(difference > 0.0);
  CHECK(difference < 0.1);
  CHECK(at::equal(logprobs[1], logprobs[2]));
  for (std::size_t i = 0; i < grads[0].size(); ++i) {
    CHECK(cosine(grads[0][i], grads[1][i]) > 0.98);
    CHECK(at::allclose(grads[1][i], grads[2][i], 1e-4, 1e-6));  // recomputation casts the same way
  }
}

TEST_CASE("ppo, rft and value in bfloat16 compute move the model as float32 compute does") {
  const auto scratch = std::filesystem::temp_directory_path() /
                       ("cudaagent-rl-mixed-" + std::to_string(::getpid()));
  std::filesystem::remove_all(scratch);
  for (const std::string stage : {"ppo", "rft", "value"}) {
    CAPTURE(stage);
    Moves full{};
    for (const c10::ScalarType compute : {at::kFloat, at::kBFloat16}) {
      const std::string dtype = compute_dtype_name(compute);
      CAPTURE(dtype);
      const Moves m = train_stage(stage, compute, scratch);
      MESSAGE(stage << " " << dtype << ": rewarded " << m.rewarded_before << " -> "
                    << m.rewarded_after << ", other " << m.other_before << " -> " << m.other_after);
      if (stage == "value") {
        CHECK(m.rewarded_after > m.other_after);
      } else {
        CHECK(m.rewarded_after > m.rewarded_before);
        // PPO pushes the unrewarded rows down; rft never sees them.
        if (stage == "ppo") CHECK(m.other_after < m.other_before);
      }
      if (compute == at::kFloat) {
        full = m;
      } else {  // and about as far (the tiny model's bfloat16 rounding is ~0.01 in a log-prob)
        CHECK(std::abs(m.rewarded_after - full.rewarded_after) < 0.1);
        CHECK(std::abs(m.other_after - full.other_after) < 0.1);
      }
    }
  }
  std::filesystem::remove_all(scratch);
}

TEST_CASE("the toy model refuses a compute dtype it does not have") {
  CHECK_FALSE(load_policy_model("toy:vocab=8", kCpu, at::kBFloat16));
  CHECK_FALSE(load_value_model("toy:vocab=8", kCpu, at::kBFloat16));
  CHECK(load_policy_model("toy:vocab=8", kCpu, at::kFloat));
  CHECK(is_toy_model("toy:vocab=8"));
  CHECK_FALSE(is_toy_model(tiny_qwen()));
}
