// The rounds' "auto" values: adaptive rounds on CUDA, fixed rounds on the CPU or when --rounds
// alone is given, and a Status for every combination that cannot run.
#include <doctest/doctest.h>

#include <string>

#include "cudaagent/profile/profile.h"

namespace cudaagent {
namespace {

ProfileSettings on(const std::string& device) {
  ProfileSettings s;
  s.device = device;
  return s;
}

std::string error_of(ProfileSettings s) {
  auto status = resolve_rounds(s);
  return status ? "" : status.message();
}

TEST_CASE("auto rounds: adaptive 6 to 10 rounds at a 1% target on cuda, 10 fixed on the cpu") {
  ProfileSettings cuda = on("cuda");
  REQUIRE(resolve_rounds(cuda));
  CHECK(cuda.rounds == kAdaptiveLeastRounds);
  CHECK(cuda.max_rounds == kAdaptiveMostRounds);
  CHECK(cuda.target_ci == kAdaptiveTargetCi);
  // Resolved values are what runs: a second resolution changes nothing.
  ProfileSettings again = cuda;
  REQUIRE(resolve_rounds(again));
  CHECK(again.rounds == cuda.rounds);
  CHECK(again.max_rounds == cuda.max_rounds);
  CHECK(again.target_ci == cuda.target_ci);

  ProfileSettings cpu = on("cpu");
  REQUIRE(resolve_rounds(cpu));
  CHECK(cpu.rounds == 10);
  CHECK(cpu.max_rounds == 0);
  CHECK(cpu.target_ci == 0);
}

TEST_CASE("auto rounds: what is given stands, and --rounds alone means fixed rounds") {
  ProfileSettings fixed = on("cuda");
  fixed.rounds = 4;
  REQUIRE(resolve_rounds(fixed));
  CHECK(fixed.max_rounds == 0);
  CHECK(fixed.target_ci == 0);

  ProfileSettings wider = on("cuda");  // a looser target alone keeps the other defaults
  wider.target_ci = 0.02;
  REQUIRE(resolve_rounds(wider));
  CHECK(wider.rounds == kAdaptiveLeastRounds);
  CHECK(wider.max_rounds == kAdaptiveMostRounds);
  CHECK(wider.target_ci == 0.02);

  ProfileSettings longer = on("cuda");  // more rounds allowed: the default target applies
  longer.rounds = 3;
  longer.max_rounds = 20;
  REQUIRE(resolve_rounds(longer));
  CHECK(longer.target_ci == kAdaptiveTargetCi);

  ProfileSettings off = on("cuda");  // target 0 given: fixed max_rounds rounds, as before
  off.target_ci = 0;
  REQUIRE(resolve_rounds(off));
  CHECK(off.target_ci == 0);

  ProfileSettings cpu = on("cpu");  // the CPU adapts only when asked
  cpu.rounds = 4;
  cpu.max_rounds = 8;
  REQUIRE(resolve_rounds(cpu));
  CHECK(cpu.target_ci == 0);
  cpu = on("cpu");
  cpu.rounds = 4;
  cpu.max_rounds = 8;
  cpu.target_ci = 0.05;
  REQUIRE(resolve_rounds(cpu));
  CHECK(cpu.target_ci == 0.05);
}

TEST_CASE("auto rounds: combinations that cannot run are errors that name the flags") {
  ProfileSettings below = on("cuda");
  below.max_rounds = 5;  // under the default least rounds
  CHECK(error_of(below) == "--max-rounds 5 is below --rounds 6 (its default here)");
  ProfileSettings target = on("cpu");
  target.target_ci = 0.01;
  CHECK(error_of(target).find("--target-ci needs --max-rounds above --rounds 10") == 0);
  ProfileSettings seconds = on("cuda");
  seconds.rounds = 5;
  seconds.rounds_seconds = 2;
  CHECK(error_of(seconds).find("--rounds-seconds needs --max-rounds above --rounds 5:") == 0);
  ProfileSettings one = on("cpu");
  one.rounds = 1;
  CHECK(error_of(one) == "--rounds must be at least 2, got 1");
}

}  // namespace
}  // namespace cudaagent
