// cudaagent-filter: task records in, the same records with a filter key out: kept or not, and
// why (see man/cudaagent-filter.1).
#include "cudaagent/filter/stage.h"

int main(int argc, char** argv) {
  cudaagent::FilterOptions options;
  CLI::App app{"Run synthesized tasks in the sandbox and keep those that build, run in eager and "
               "torch.compile, are deterministic, depend on their inputs and whose eager time "
               "is in the window.", "cudaagent-filter"};
  cudaagent::add_filter_flags(app, options);
  return cudaagent::run_tool("cudaagent-filter", app, options.common, argc, argv,
                             [&](cudaagent::Session& session) {
                               return cudaagent::run_filter(options, session);
                             });
}
