// cudaagent-profile: time verified candidates against PyTorch eager and torch.compile on an
// exclusive device, as if they were hostile (see man/cudaagent-profile.1).
#include "cudaagent/profile/stage.h"

int main(int argc, char** argv) {
  cudaagent::ProfileOptions options;
  CLI::App app{"Time verified candidates against PyTorch eager and torch.compile in alternating "
               "rounds, with hidden output checks, and print one profile per candidate.",
               "cudaagent-profile"};
  cudaagent::add_profile_flags(app, options);
  return cudaagent::run_tool("cudaagent-profile", app, options.common, argc, argv,
                             [&](cudaagent::Session& session) {
                               return cudaagent::run_profile(options, session);
                             });
}
