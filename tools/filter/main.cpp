// cudaagent-filter: task records in, the same records with a filter key out: kept or not, and
// why (see man/cudaagent-filter.1).
#include "cudaagent/filter/stage.h"

namespace {
constexpr const char* kDescription =
    "Run synthesized tasks in the sandbox and keep those that build, run in eager and "
    "torch.compile, are deterministic, depend on their inputs and whose eager time is in "
    "the window.";
}  // namespace

int main(int argc, char** argv) {
  cudaagent::FilterOptions options;
  return cudaagent::run_tool(
      "cudaagent-filter", kDescription, options.common, argc, argv,
      [&](CLI::App& app) { cudaagent::add_filter_flags(app, options); },
      [&](cudaagent::Session& session) { return cudaagent::run_filter(options, session); });
}
