// cudaagent-train: the learner's programs over one model library (see man/cudaagent-train.1):
// serve a checkpoint over an OpenAI-compatible API, tokenize, score token ids, benchmark, and the
// training stages rft, value and ppo over trajectory records. Each subcommand's flags and run
// function live in lib/train; this file only dispatches.
#include <CLI/CLI.hpp>

#include "cudaagent/train/commands.h"
#include "cudaagent/train/rl_run.h"
#include "cudaagent/train/serve.h"

int main(int argc, char** argv) {
  namespace train = cudaagent::train;
  CLI::App app{"Train, serve and inspect a Qwen2/Llama-family policy on libtorch.", "cudaagent-train"};
  app.require_subcommand(1);
  cudaagent::CommonOptions common;
  common.versions = train::train_dependency_versions();
  train::ServeOptions serve;
  train::TokenizeOptions tokenize;
  train::LogprobsOptions logprobs;
  train::BenchOptions bench;
  CLI::App* serve_command = train::add_serve_command(app, serve, common);
  CLI::App* tokenize_command = train::add_tokenize_command(app, tokenize, common);
  CLI::App* logprobs_command = train::add_logprobs_command(app, logprobs, common);
  CLI::App* bench_command = train::add_bench_command(app, bench, common);
  // The RL stages carry their own CommonOptions (inputs, --errors, ...) inside their options.
  cudaagent::RlRunOptions rft_options, value_options, ppo_options;
  CLI::App* rft = app.add_subcommand(
      "rft", "Fine-tune on positive trajectories that pass the behaviour filters");
  cudaagent::add_rft_flags(*rft, rft_options);
  CLI::App* value = app.add_subcommand("value", "Pre-train the critic on GAE targets, actor frozen");
  cudaagent::add_value_flags(*value, value_options);
  CLI::App* ppo =
      app.add_subcommand("ppo", "Update actor and critic with PPO from scored trajectories");
  cudaagent::add_ppo_flags(*ppo, ppo_options);
  return cudaagent::run_tool(
      "cudaagent-train", app, common, argc, argv,
      [&](cudaagent::Session& session) -> cudaagent::Result<cudaagent::StageEnd> {
        if (serve_command->parsed()) return train::run_serve(serve, session);
        if (tokenize_command->parsed()) return train::run_tokenize(tokenize, common, session);
        if (logprobs_command->parsed()) return train::run_logprobs(logprobs, common, session);
        if (bench_command->parsed()) return train::run_bench(bench, session);
        if (rft->parsed()) return cudaagent::run_rft(rft_options, session);
        if (value->parsed()) return cudaagent::run_value(value_options, session);
        if (ppo->parsed()) return cudaagent::run_ppo(ppo_options, session);
        return cudaagent::Status::error("no subcommand");
      });
}
