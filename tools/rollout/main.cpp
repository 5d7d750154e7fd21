// cudaagent-rollout: runs agent episodes on tasks against an OpenAI-compatible model server, with
// sandboxed tools and a trusted evaluator, and prints one trajectory record per episode (see
// man/cudaagent-rollout.1).
#include "cudaagent/rollout/rollout_stage.h"

namespace {
constexpr const char* kDescription =
    "Run ReAct episodes on tasks: the model writes, compiles, verifies and profiles kernels "
    "in a sandboxed workspace; print one trajectory record per episode with its final "
    "verify, profile and reward.";
}  // namespace

int main(int argc, char** argv) {
  namespace rollout = cudaagent::rollout;
  rollout::RolloutOptions options;
  return cudaagent::run_tool(
      "cudaagent-rollout", kDescription, options.common, argc, argv,
      [&](CLI::App& app) { rollout::add_rollout_flags(app, options); },
      [&](cudaagent::Session& session) { return rollout::run_rollout(options, session); });
}
