// cudaagent-train: the learner's programs over one model library (see man/cudaagent-train.1):
// serve a checkpoint over an OpenAI-compatible API, tokenize, score token ids, benchmark.
#include "cudaagent/train/commands.h"
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
  // rft, value, ppo: the reinforcement-learning subcommands join here.
  return cudaagent::run_tool(
      "cudaagent-train", app, common, argc, argv,
      [&](cudaagent::Session& session) -> cudaagent::Result<cudaagent::StageEnd> {
        if (serve_command->parsed()) return train::run_serve(serve, session);
        if (tokenize_command->parsed()) return train::run_tokenize(tokenize, common, session);
        if (logprobs_command->parsed()) return train::run_logprobs(logprobs, common, session);
        if (bench_command->parsed()) return train::run_bench(bench, session);
        return cudaagent::Status::error("no subcommand");
      });
}
