// cudaagent-train: the training stages as subcommands (see man/cudaagent-train.1). Each
// subcommand's flags and run function live in lib/train; this file only dispatches.
#include "cudaagent/train/rl_run.h"

int main(int argc, char** argv) {
  CLI::App app{
      "Train the agent's model: rejection fine-tuning, value pre-training and PPO over "
      "trajectory records.",
      "cudaagent-train"};
  // One subcommand, unless --version (added by run_tool) is all that was asked.
  app.require_subcommand(0, 1);
  app.parse_complete_callback([&app] {
    if (app.get_subcommands().empty() && app.get_option("--version")->count() == 0) {
      throw CLI::RequiredError("A subcommand");
    }
  });
  cudaagent::RlRunOptions rft_options, value_options, ppo_options;
  CLI::App* rft = app.add_subcommand(
      "rft", "Fine-tune on positive trajectories that pass the behaviour filters");
  cudaagent::add_rft_flags(*rft, rft_options);
  CLI::App* value =
      app.add_subcommand("value", "Pre-train the critic on GAE targets, actor frozen");
  cudaagent::add_value_flags(*value, value_options);
  CLI::App* ppo =
      app.add_subcommand("ppo", "Update actor and critic with PPO from scored trajectories");
  cudaagent::add_ppo_flags(*ppo, ppo_options);
  cudaagent::CommonOptions common;  // the subcommand's own CommonOptions carry its flags
  return cudaagent::run_tool("cudaagent-train", app, common, argc, argv,
                             [&](cudaagent::Session& session) {
                               if (rft->parsed()) return cudaagent::run_rft(rft_options, session);
                               if (value->parsed())
                                 return cudaagent::run_value(value_options, session);
                               return cudaagent::run_ppo(ppo_options, session);
                             });
}
