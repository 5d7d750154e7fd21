// cudaagent-dedup: task records in, the same records with a dedup key out, near-duplicates of a
// reference set or of an earlier task left out (see man/cudaagent-dedup.1).
#include "cudaagent/dedup/stage.h"

namespace {
constexpr const char* kDescription =
    "Drop tasks whose Python AST is too similar to a reference task (KernelBench, any "
    "directory of tasks) or to an earlier task of the input.";
}  // namespace

int main(int argc, char** argv) {
  cudaagent::DedupOptions options;
  return cudaagent::run_tool(
      "cudaagent-dedup", kDescription, options.common, argc, argv,
      [&](CLI::App& app) { cudaagent::add_dedup_flags(app, options); },
      [&](cudaagent::Session& session) { return cudaagent::run_dedup(options, session); });
}
