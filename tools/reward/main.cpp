// cudaagent-reward: records carrying verify and profile keys in, the same records with a reward
// key out (see man/cudaagent-reward.1).
#include "cudaagent/reward/stage.h"

int main(int argc, char** argv) {
  cudaagent::RewardOptions options;
  CLI::App app{"Score verified and profiled candidates with CUDA Agent's milestone reward "
               "(or a speedup form for ablations).", "cudaagent-reward"};
  cudaagent::add_reward_flags(app, options);
  return cudaagent::run_tool("cudaagent-reward", app, options.common, argc, argv,
                             [&](cudaagent::Session& session) {
                               return cudaagent::run_reward(options, session);
                             });
}
