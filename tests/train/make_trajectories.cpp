// cudaagent-test-trajectories: writes trajectory records for the CLI tests and the GPU bench.
//   toy     episodes sampled from a toy model (a spec or a checkpoint directory), with the
//           sampler's log-probs and the pattern reward: on-policy data for that model
//   random  random token ids and log-probs of given sizes (shape tests, throughput benches)
//   save-toy  a toy model spec written as a checkpoint directory
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "rl_toy_env.h"

int main(int argc, char** argv) {
  CLI::App app{"Write trajectory records for tests and benches.", "cudaagent-test-trajectories"};
  app.require_subcommand(1);
  int rows = 32, turns = 1, prompt = 4, response = 16, model_tokens = 6, observation_tokens = 2;
  std::int64_t vocab = 16;
  std::uint64_t seed = 1;
  std::string model = "toy:vocab=8,seed=7";
  CLI::App* toy =
      app.add_subcommand("toy", "Episodes sampled from a toy model, scored by the pattern reward");
  toy->add_option("--model", model, "Toy model spec or checkpoint directory")
      ->capture_default_str();
  toy->add_option("--rows", rows)->capture_default_str();
  toy->add_option("--turns", turns)->capture_default_str();
  toy->add_option("--model-tokens", model_tokens, "Tokens per model turn")->capture_default_str();
  toy->add_option("--observation-tokens", observation_tokens)->capture_default_str();
  toy->add_option("--seed", seed)->capture_default_str();
  CLI::App* random = app.add_subcommand("random", "Random trajectories of given sizes");
  random->add_option("--rows", rows)->capture_default_str();
  random->add_option("--prompt", prompt, "Prompt tokens")->capture_default_str();
  random->add_option("--response", response, "Response tokens")->capture_default_str();
  random->add_option("--turns", turns)->capture_default_str();
  random->add_option("--vocab", vocab)->capture_default_str();
  random->add_option("--seed", seed)->capture_default_str();
  std::string save_to;
  CLI::App* save =
      app.add_subcommand("save-toy", "Save a toy model spec as a checkpoint directory");
  save->add_option("--model", model)->capture_default_str();
  save->add_option("--out", save_to)->required();
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(1);

  if (save->parsed()) {
    auto loaded = cudaagent::load_policy_model(model, c10::Device(c10::kCPU));
    auto status = loaded ? loaded.value()->save(save_to) : loaded.status();
    if (!status) {
      std::fprintf(stderr, "cudaagent-test-trajectories: %s\n", status.message().c_str());
      return 1;
    }
    return 0;
  }
  std::vector<cudaagent::Trajectory> trajectories;
  if (toy->parsed()) {
    auto loaded = cudaagent::load_policy_model(model, c10::Device(c10::kCPU));
    auto* toy_model =
        loaded ? dynamic_cast<cudaagent::ToyPolicyModel*>(loaded.value().get()) : nullptr;
    if (toy_model == nullptr) {
      std::fprintf(stderr, "cudaagent-test-trajectories: %s is not a toy model\n", model.c_str());
      return 2;
    }
    cudaagent::testing::ToyEpisodes spec;
    spec.rows = rows;
    spec.turns = turns;
    spec.model_tokens = model_tokens;
    spec.observation_tokens = observation_tokens;
    at::Generator generator = at::detail::createCPUGenerator(seed);
    trajectories = cudaagent::testing::sample_episodes(*toy_model, spec, generator);
  } else {
    trajectories =
        cudaagent::testing::random_trajectories(rows, prompt, response, turns, vocab, seed);
  }
  std::string out;
  for (const auto& trajectory : trajectories) {
    out.clear();
    cudaagent::testing::append_trajectory_record(out, trajectory);
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return 0;
}
