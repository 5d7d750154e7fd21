// cudaagent-profile: time verified candidates against PyTorch eager and torch.compile on an
// exclusive device, as if they were hostile (see man/cudaagent-profile.1).
#include "cudaagent/profile/stage.h"

namespace {
constexpr const char* kDescription =
    "Time verified candidates against PyTorch eager and torch.compile in alternating "
    "rounds, with hidden output checks, and print one profile per candidate.";
}  // namespace

int main(int argc, char** argv) {
  cudaagent::ProfileOptions options;
  return cudaagent::run_tool(
      "cudaagent-profile", kDescription, options.common, argc, argv,
      [&](CLI::App& app) { cudaagent::add_profile_flags(app, options); },
      [&](cudaagent::Session& session) { return cudaagent::run_profile(options, session); });
}
