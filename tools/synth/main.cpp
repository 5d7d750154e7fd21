// cudaagent-synth: compose catalog operators into KernelBench-form tasks, at random or as a
// model proposes them, and write one task record per line (see man/cudaagent-synth.1).
#include "cudaagent/synth/stage.h"

namespace {
constexpr const char* kDescription =
    "Compose PyTorch operators from a catalog into tasks whose shapes fit by construction "
    "and whose estimated eager time lands in a window.";
}  // namespace

int main(int argc, char** argv) {
  cudaagent::SynthOptions options;
  return cudaagent::run_tool(
      "cudaagent-synth", kDescription, options.common, argc, argv,
      [&](CLI::App& app) { cudaagent::add_synth_flags(app, options); },
      [&](cudaagent::Session& session) { return cudaagent::run_synth(options, session); });
}
