// cudaagent-verify: build, run and judge candidate kernels as if they were hostile
// (see man/cudaagent-verify.1).
#include "cudaagent/verify/stage.h"

int main(int argc, char** argv) {
  cudaagent::VerifyOptions options;
  CLI::App app{"Build a candidate's kernels, run it against the pristine reference in a sandbox, "
               "and print one verdict per candidate.", "cudaagent-verify"};
  cudaagent::add_verify_flags(app, options);
#if CUDAAGENT_HAVE_CUDA
  options.cuda_check = cudaagent::check_cuda_sources;
#endif
  return cudaagent::run_tool("cudaagent-verify", app, options.common, argc, argv,
                             [&](cudaagent::Session& session) {
                               return cudaagent::run_verify(options, session);
                             });
}
