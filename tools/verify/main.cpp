// cudaagent-verify: build, run and judge candidate kernels as if they were hostile
// (see man/cudaagent-verify.1).
#include "cudaagent/verify/stage.h"

namespace {
constexpr const char* kDescription =
    "Build a candidate's kernels, run it against the pristine reference in a sandbox, and "
    "print one verdict per candidate.";
}  // namespace

int main(int argc, char** argv) {
  cudaagent::VerifyOptions options;
#if CUDAAGENT_HAVE_CUDA
  options.cuda_check = cudaagent::check_cuda_sources;
#endif
  return cudaagent::run_tool(
      "cudaagent-verify", kDescription, options.common, argc, argv,
      [&](CLI::App& app) { cudaagent::add_verify_flags(app, options); },
      [&](cudaagent::Session& session) { return cudaagent::run_verify(options, session); });
}
