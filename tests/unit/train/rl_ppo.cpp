// The trainers on the toy model: on-policy sanity (the first minibatch of freshly sampled
// trajectories has ratio 1 and no clipping) and learning (PPO raises the pattern reward from a
// fixed seed, single- and multi-turn).
#include "cudaagent/train/rl_ppo.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "rl_toy_env.h"

using namespace cudaagent;
using cudaagent::testing::ToyEpisodes;

namespace {

std::vector<const Trajectory*> pointers(const std::vector<Trajectory>& items) {
  std::vector<const Trajectory*> out;
  for (const auto& item : items) out.push_back(&item);
  return out;
}

PpoSettings learning_settings() {
  PpoSettings settings;
  settings.batching.mini_batch_size = 16;
  settings.batching.micro_batch_size = 8;
  settings.actor_optimizer.lr = 3e-3;
  settings.actor_optimizer.weight_decay = 0.0;
  settings.critic_optimizer.lr = 1e-2;
  settings.critic_optimizer.weight_decay = 0.0;
  return settings;
}

struct Curve {
  std::vector<double> rewards;
  double mean(std::size_t begin, std::size_t end) const {
    double sum = 0;
    for (std::size_t i = begin; i < end; ++i) sum += rewards[i];
    return sum / static_cast<double>(end - begin);
  }
};

ToyPolicyModel toy(std::uint64_t seed = 7) {
  ToyModelConfig config;
  config.vocab = 8;
  config.seed = seed;
  return ToyPolicyModel(config, c10::Device(c10::kCPU));
}

std::unique_ptr<ValueModel> toy_critic() {
  auto critic = load_value_model("toy:vocab=8,seed=7", c10::Device(c10::kCPU));
  REQUIRE(critic);
  return std::move(critic.value());
}

Curve train(const ToyEpisodes& spec, int iterations, const PpoSettings& settings) {
  ToyPolicyModel actor = toy();
  auto critic = load_value_model("toy:vocab=8,seed=7", c10::Device(c10::kCPU));
  REQUIRE(critic);
  auto communicator = make_local_communicator();
  PpoTrainer trainer(actor, *critic.value(), nullptr, settings, *communicator);
  at::Generator generator = at::detail::createCPUGenerator(11);
  Curve curve;
  for (int i = 0; i < iterations; ++i) {
    auto episodes = cudaagent::testing::sample_episodes(actor, spec, generator);
    MetricList metrics = trainer.iteration(pointers(episodes), i);
    curve.rewards.push_back(metric_value(metrics, "critic/score/mean"));
    if (std::getenv("CUDAAGENT_TEST_VERBOSE") != nullptr) {
      std::printf("%d reward %.3f pg %.4f vf %.4f clip %.3f kl %.5f ent %.3f\n", i,
                  curve.rewards.back(), metric_value(metrics, "actor/pg_loss"),
                  metric_value(metrics, "critic/vf_loss"),
                  metric_value(metrics, "actor/pg_clipfrac"), metric_value(metrics, "actor/ppo_kl"),
                  metric_value(metrics, "actor/entropy"));
    }
  }
  return curve;
}

}  // namespace

TEST_CASE("PPO raises the pattern reward from a fixed seed, the same way every time") {
  ToyEpisodes spec;
  Curve curve = train(spec, 60, learning_settings());
  const double first = curve.mean(0, 5);
  const double last = curve.mean(55, 60);
  MESSAGE("single turn: reward of the first 5 iterations " << first << ", of the last 5 " << last);
  CHECK(first < 0.25);  // chance is 1/8 per token
  CHECK(last > 0.9);
  Curve again = train(spec, 60, learning_settings());
  CHECK(again.rewards == curve.rewards);  // bit for bit: fixed seeds, one thread
}

TEST_CASE("PPO learns across observation tokens (multi-turn)") {
  ToyEpisodes spec;
  spec.turns = 3;
  spec.model_tokens = 3;
  spec.observation_tokens = 2;  // random environment tokens between the turns, loss mask 0
  Curve curve = train(spec, 60, learning_settings());
  const double first = curve.mean(0, 5);
  const double last = curve.mean(55, 60);
  MESSAGE("multi-turn: reward of the first 5 iterations " << first << ", of the last 5 " << last);
  CHECK(first < 0.25);
  CHECK(last > 0.85);
}

TEST_CASE("on-policy sanity: the first minibatch of fresh trajectories has ratio 1, no clipping") {
  auto check_first_minibatch = [](int turns, std::int64_t micro, std::uint64_t sampler_seed) {
    ToyPolicyModel actor = toy();
    ToyPolicyModel sampler = toy(sampler_seed);
    auto critic = toy_critic();
    auto communicator = make_local_communicator();
    PpoSettings settings = learning_settings();
    settings.batching.micro_batch_size = micro;
    PpoTrainer trainer(actor, *critic, nullptr, settings, *communicator);
    at::Generator generator = at::detail::createCPUGenerator(3);
    ToyEpisodes spec;
    spec.turns = turns;
    spec.model_tokens = 4;
    // Train a few iterations first, so the check is not only of an untrained model.
    for (int i = 0; i < 3; ++i) {
      auto episodes =
          cudaagent::testing::sample_episodes(sampler_seed == 7 ? actor : sampler, spec, generator);
      trainer.iteration(pointers(episodes), i);
    }
    auto fresh =
        cudaagent::testing::sample_episodes(sampler_seed == 7 ? actor : sampler, spec, generator);
    MetricList metrics = trainer.iteration(pointers(fresh), 3);
    return std::pair{metric_value(metrics, "actor/first_minibatch/ratio_max_deviation", -1),
                     metric_value(metrics, "actor/first_minibatch/pg_clipfrac", -1)};
  };
  for (int turns : {1, 3}) {
    for (std::int64_t micro : {1, 5, 16}) {
      CAPTURE(turns);
      CAPTURE(micro);
      auto [deviation, clip] = check_first_minibatch(turns, micro, 7);
      CHECK(deviation >= 0.0);
      CHECK(deviation < 1e-5);
      CHECK(clip == 0.0);
    }
  }
  // Control: trajectories of another policy are off-policy, and the check sees it.
  auto [deviation, clip] = check_first_minibatch(1, 4, 8);
  CHECK(deviation > 0.1);
  CHECK(clip > 0.0);
}

TEST_CASE("recomputed old log-probs agree with the sampler's on fresh data") {
  ToyPolicyModel actor = toy();
  auto critic = toy_critic();
  auto communicator = make_local_communicator();
  PpoSettings settings = learning_settings();
  settings.recompute_old_log_probs = true;
  PpoTrainer trainer(actor, *critic, nullptr, settings, *communicator);
  at::Generator generator = at::detail::createCPUGenerator(4);
  ToyEpisodes spec;
  spec.turns = 2;
  auto episodes = cudaagent::testing::sample_episodes(actor, spec, generator);
  MetricList metrics = trainer.iteration(pointers(episodes), 0);
  CHECK(metric_value(metrics, "actor/behaviour_logprob_gap", -1) >= 0.0);
  CHECK(metric_value(metrics, "actor/behaviour_logprob_gap", -1) < 1e-6);
  CHECK(metric_value(metrics, "perf/old_log_prob_tokens_per_s") > 0.0);
}

TEST_CASE("KL to the reference, as a loss and in the reward") {
  ToyPolicyModel actor = toy();
  ToyPolicyModel reference = toy();
  auto critic = toy_critic();
  auto communicator = make_local_communicator();
  PpoSettings settings = learning_settings();
  settings.kl_loss_coef = 0.1;
  settings.kl_reward_coef = 0.05;
  settings.kl_reward_type = KlEstimator::kK3;  // never negative, so above any target once moved
  settings.kl_adaptive = true;
  settings.kl_target = 1e-6;
  settings.kl_horizon = 100;
  PpoTrainer trainer(actor, *critic, &reference, settings, *communicator);
  at::Generator generator = at::detail::createCPUGenerator(6);
  ToyEpisodes spec;
  std::vector<MetricList> history;
  for (int i = 0; i < 6; ++i) {
    auto episodes = cudaagent::testing::sample_episodes(actor, spec, generator);
    history.push_back(trainer.iteration(pointers(episodes), i));
  }
  // The actor starts as the reference: no KL on the first batch; then it moves away.
  CHECK(std::abs(metric_value(history[0], "actor/reward_kl_penalty", -1)) < 1e-7);
  CHECK(metric_value(history[0], "actor/kl_loss", -1) >= 0.0);
  CHECK(metric_value(history[0], "actor/kl_loss", -1) < 1e-3);
  CHECK(metric_value(history[5], "actor/reward_kl_penalty") > 1e-3);
  CHECK(metric_value(history[5], "actor/kl_loss") > 1e-4);
  // Below the target at first (one step down by 1 - 0.2 * 32 / 100), then above it for five
  // (each up by 1 + 0.2 * 32 / 100): the adaptive coefficient grows.
  CHECK(trainer.kl_controller().value == doctest::Approx(0.05 * 0.936 * std::pow(1.064, 5)));
}

TEST_CASE("critic warm-up leaves the actor untouched") {
  ToyPolicyModel actor = toy();
  auto critic = toy_critic();
  auto communicator = make_local_communicator();
  PpoSettings settings = learning_settings();
  settings.critic_warmup = 1;
  PpoTrainer trainer(actor, *critic, nullptr, settings, *communicator);
  std::vector<at::Tensor> before;
  for (const auto& p : actor.parameters()) before.push_back(p.detach().clone());
  at::Generator generator = at::detail::createCPUGenerator(9);
  auto episodes = cudaagent::testing::sample_episodes(actor, ToyEpisodes{}, generator);
  MetricList warm = trainer.iteration(pointers(episodes), 0);
  for (std::size_t i = 0; i < before.size(); ++i)
    CHECK(at::equal(before[i], actor.parameters()[i]));
  CHECK(metric_value(warm, "critic/grad_norm") > 0.0);
  CHECK(metric_value(warm, "actor/grad_norm", -1) == -1);  // no actor step, no actor metrics
  trainer.iteration(pointers(episodes), 1);
  CHECK_FALSE(at::equal(before[2], actor.parameters()[2]));
}

TEST_CASE("value pre-training fits the returns") {
  ToyPolicyModel sampler = toy();
  at::Generator generator = at::detail::createCPUGenerator(12);
  ToyEpisodes spec;
  spec.turns = 2;
  auto episodes = cudaagent::testing::sample_episodes(sampler, spec, generator);
  auto critic = toy_critic();
  auto communicator = make_local_communicator();
  ValueSettings settings;
  settings.optimizer.lr = 1e-2;
  settings.batching.micro_batch_size = 8;
  ValueTrainer trainer(*critic, settings, *communicator);
  std::vector<double> losses;
  for (int i = 0; i < 40; ++i)
    losses.push_back(metric_value(trainer.iteration(pointers(episodes), i), "critic/vf_loss"));
  MESSAGE("value loss " << losses.front() << " -> " << losses.back());
  CHECK(losses.back() < 0.5 * losses.front());
}

TEST_CASE("rejection fine-tuning on good trajectories raises the reward") {
  ToyPolicyModel model = toy();
  at::Generator generator = at::detail::createCPUGenerator(13);
  ToyEpisodes spec;
  // Perfect trajectories: every response token follows the pattern.
  auto perfect = cudaagent::testing::sample_episodes(model, spec, generator);
  for (auto& t : perfect) {
    std::int32_t previous = t.prompt_ids.back();
    for (auto& token : t.response_ids) token = previous = (previous + 1) % 8;
    t.reward = cudaagent::testing::pattern_reward(t, 8);
  }
  auto mean_reward = [&]() {
    auto sampled = cudaagent::testing::sample_episodes(model, spec, generator);
    double sum = 0;
    for (const auto& t : sampled) sum += t.reward;
    return sum / static_cast<double>(sampled.size());
  };
  const double before = mean_reward();
  auto communicator = make_local_communicator();
  RftSettings settings;
  settings.optimizer.lr = 1e-2;
  RftTrainer trainer(model, settings, *communicator);
  double first_loss = 0, last_loss = 0;
  for (int i = 0; i < 30; ++i) {
    const double loss = metric_value(trainer.iteration(pointers(perfect), i), "rft/loss");
    (i == 0 ? first_loss : last_loss) = loss;
  }
  const double after = mean_reward();
  MESSAGE("rft: loss " << first_loss << " -> " << last_loss << ", reward " << before << " -> "
                       << after);
  CHECK(last_loss < 0.5 * first_loss);
  CHECK(after > before + 0.4);
}
