// cudaagent-reward: records carrying verify and profile keys in, the same records with a reward
// key out (see man/cudaagent-reward.1).
#include "cudaagent/reward/stage.h"

namespace {
constexpr const char* kDescription =
    "Score verified and profiled candidates with CUDA Agent's milestone reward (or a "
    "speedup form for ablations).";
}  // namespace

int main(int argc, char** argv) {
  cudaagent::RewardOptions options;
  return cudaagent::run_tool(
      "cudaagent-reward", kDescription, options.common, argc, argv,
      [&](CLI::App& app) { cudaagent::add_reward_flags(app, options); },
      [&](cudaagent::Session& session) { return cudaagent::run_reward(options, session); });
}
