// cudaagent-dedup: task records in, the same records with a dedup key out, near-duplicates of a
// reference set or of an earlier task left out (see man/cudaagent-dedup.1).
#include "cudaagent/dedup/stage.h"

int main(int argc, char** argv) {
  cudaagent::DedupOptions options;
  CLI::App app{"Drop tasks whose Python AST is too similar to a reference task (KernelBench, any "
               "directory of tasks) or to an earlier task of the input.", "cudaagent-dedup"};
  cudaagent::add_dedup_flags(app, options);
  return cudaagent::run_tool("cudaagent-dedup", app, options.common, argc, argv,
                             [&](cudaagent::Session& session) {
                               return cudaagent::run_dedup(options, session);
                             });
}
