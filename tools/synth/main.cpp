// cudaagent-synth: compose catalog operators into KernelBench-form tasks, at random or as a
// model proposes them, and write one task record per line (see man/cudaagent-synth.1).
#include "cudaagent/synth/stage.h"

int main(int argc, char** argv) {
  cudaagent::SynthOptions options;
  CLI::App app{"Compose PyTorch operators from a catalog into tasks whose shapes fit by "
               "construction and whose estimated eager time lands in a window.", "cudaagent-synth"};
  cudaagent::add_synth_flags(app, options);
  return cudaagent::run_tool("cudaagent-synth", app, options.common, argc, argv,
                             [&](cudaagent::Session& session) {
                               return cudaagent::run_synth(options, session);
                             });
}
