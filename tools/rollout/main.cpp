// cudaagent-rollout: runs agent episodes on tasks against an OpenAI-compatible model server, with
// sandboxed tools and a trusted evaluator, and prints one trajectory record per episode (see
// man/cudaagent-rollout.1).
#include "cudaagent/rollout/rollout_stage.h"

int main(int argc, char** argv) {
  cudaagent::rollout::RolloutOptions options;
  CLI::App app{
      "Run ReAct episodes on tasks: the model writes, compiles, verifies and profiles kernels in a "
      "sandboxed workspace; print one trajectory record per episode with its final verify, "
      "profile and reward.",
      "cudaagent-rollout"};
  cudaagent::rollout::add_rollout_flags(app, options);
  return cudaagent::run_tool(
      "cudaagent-rollout", app, options.common, argc, argv,
      [&](cudaagent::Session& session) { return cudaagent::rollout::run_rollout(options, session); });
}
