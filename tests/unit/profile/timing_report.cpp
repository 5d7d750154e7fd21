// Tests of the profile timing report: built from simulated rounds, written as JSON, and read back
// by the reward stage's own reader, so the shape stays the one cudaagent-reward gates on.
#include "cudaagent/profile/timing_report.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "cudaagent/reward/reward.h"
#include "test_support.h"
#include "timing_simulation.h"

using namespace cudaagent;
using cudaagent::testing::simulate_rounds;
using cudaagent::testing::SimulatedSetup;

namespace {

// Eager, compile and candidate rounds with true times eager_ms, compile_ms, candidate_ms. The
// arms are simulated pairwise (eager-candidate, compile-candidate); the candidate of the first
// pair is kept.
TimingSamples simulate_profile(double eager_ms, double compile_ms, double candidate_ms,
                               std::uint64_t seed, int rounds = 20, int per_round = 10) {
  std::mt19937_64 rng(seed);
  SimulatedSetup setup;
  setup.rounds = rounds;
  setup.per_round = per_round;
  setup.baseline_ms = eager_ms;
  setup.ratio = eager_ms / candidate_ms;
  auto eager = simulate_rounds(setup, rng);
  setup.baseline_ms = compile_ms;
  setup.ratio = compile_ms / candidate_ms;
  auto compile = simulate_rounds(setup, rng);
  return {eager.baseline, compile.baseline, eager.candidate};
}

// The reward a PASS record with this profile timing earns (milestone form).
double milestone_reward(const std::string& timing) {
  const std::string record = R"({"id":"t","verify":{"verdict":"PASS"},"profile":)" + timing + "}";
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  REQUIRE(parser.parse(record).get(object) == simdjson::SUCCESS);
  auto inputs = read_reward_inputs(object);
  REQUIRE_MESSAGE(inputs, inputs.status().message());
  auto decision = decide_reward(inputs.value(), RewardSettings{});
  REQUIRE(decision);
  return decision.value().value;
}

}  // namespace

TEST_CASE("timing report: JSON shape the reward stage reads, and the tiers it earns") {
  struct Row {
    double eager, compile, candidate, reward;
  };
  const Row rows[] = {
      {2.0, 1.5, 1.0, 3},    // 2x eager, 1.5x compile
      {2.0, 1.0, 1.0, 2},    // 2x eager, level with compile
      {1.0, 0.8, 1.0, 1},    // level with eager
      {1.0, 1.0, 0.97, 1},   // 3% faster: below the 5% margin
  };
  for (const auto& row : rows) {
    CAPTURE(row.eager);
    CAPTURE(row.compile);
    CAPTURE(row.candidate);
    auto report = build_timing_report(simulate_profile(row.eager, row.compile, row.candidate, 17),
                                      BootstrapSettings{});
    REQUIRE(report);
    const std::string json = timing_json(report.value());
    REQUIRE(testing::is_valid_json(json));
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    REQUIRE(parser.parse(json).get(root) == simdjson::SUCCESS);
    for (const std::string arm : {"eager", "compile", "candidate"}) {
      CAPTURE(arm);
      const std::string at = "/times_ms/" + arm;
      double median = 0, low = 0, high = 0, cv = -1;
      std::int64_t trials = 0;
      CHECK(root.at_pointer(at + "/median").get(median) == simdjson::SUCCESS);
      CHECK(root.at_pointer(at + "/ci95/0").get(low) == simdjson::SUCCESS);
      CHECK(root.at_pointer(at + "/ci95/1").get(high) == simdjson::SUCCESS);
      CHECK(root.at_pointer(at + "/cv").get(cv) == simdjson::SUCCESS);
      CHECK(root.at_pointer(at + "/trials").get(trials) == simdjson::SUCCESS);
      CHECK(low <= median);
      CHECK(median <= high);
      CHECK(cv > 0);
      CHECK(trials == 200);
    }
    for (const std::string baseline : {"eager", "compile"}) {
      CAPTURE(baseline);
      const std::string at = "/speedup/" + baseline;
      double median = 0, low = 0, last_ratio = 0;
      std::int64_t rounds = 0;
      CHECK(root.at_pointer(at + "/median").get(median) == simdjson::SUCCESS);
      CHECK(root.at_pointer(at + "/ci95/0").get(low) == simdjson::SUCCESS);
      CHECK(root.at_pointer(at + "/rounds").get(rounds) == simdjson::SUCCESS);
      CHECK(root.at_pointer(at + "/round_ratios/19").get(last_ratio) == simdjson::SUCCESS);
      CHECK(root.at_pointer(at + "/round_ratios/20").error() != simdjson::SUCCESS);
      CHECK(rounds == 20);
      CHECK(low <= median);
      const double truth = (baseline == "eager" ? row.eager : row.compile) / row.candidate;
      CHECK(median == doctest::Approx(truth).epsilon(0.03));
    }
    CHECK(milestone_reward(json) == row.reward);
  }
}

TEST_CASE("timing report without torch.compile writes null and earns at most tier 2") {
  auto samples = simulate_profile(2.0, 1.0, 1.0, 5);
  samples.compile.clear();
  auto report = build_timing_report(samples, BootstrapSettings{});
  REQUIRE(report);
  CHECK_FALSE(report.value().compile);
  CHECK_FALSE(report.value().speedup_compile);
  const std::string json = timing_json(report.value());
  CHECK(json.find(R"("compile":null)") != std::string::npos);
  CHECK(milestone_reward(json) == 2);
}

TEST_CASE("timing report is deterministic for a seed, each arm draws its own stream") {
  const auto samples = simulate_profile(2.0, 1.5, 1.0, 23);
  BootstrapSettings a, b;
  a.seed = 1;
  b.seed = 2;
  auto first = build_timing_report(samples, a), again = build_timing_report(samples, a),
       other = build_timing_report(samples, b);
  REQUIRE((first && again && other));
  CHECK(timing_json(first.value()) == timing_json(again.value()));
  CHECK(timing_json(first.value()) != timing_json(other.value()));
  // Identical samples in two arms still get different resamples. (60 short rounds: with few
  // rounds the bootstrap medians sit on few distinct values and two streams may agree anyway.)
  const auto fine = simulate_profile(2.0, 1.5, 1.0, 23, 60, 3);
  TimingSamples twins{fine.eager, fine.eager, fine.candidate};
  auto report = build_timing_report(twins, a);
  REQUIRE(report);
  CHECK(report.value().eager.median_ms == report.value().compile->median_ms);
  CHECK((report.value().eager.ci_low_ms != report.value().compile->ci_low_ms ||
         report.value().eager.ci_high_ms != report.value().compile->ci_high_ms));
}

TEST_CASE("timing report errors name the arm") {
  const auto good = simulate_profile(2.0, 1.5, 1.0, 3);
  struct Row {
    std::string name;
    TimingSamples samples;
    const char* context;
  };
  auto nan_compile = good;
  nan_compile.compile[3][2] = std::numeric_limits<double>::quiet_NaN();
  auto short_candidate = good;
  short_candidate.candidate.pop_back();
  auto empty_eager = good;
  empty_eager.eager.clear();
  auto short_compile = good;
  short_compile.compile.pop_back();
  const Row rows[] = {
      {"NaN in compile", nan_compile, "compile: "},
      {"candidate has a round less", short_candidate, "speedup over eager: "},
      {"no eager samples", empty_eager, "eager: "},
      {"compile has a round less", short_compile, "speedup over compile: "},
  };
  for (const auto& row : rows) {
    CAPTURE(row.name);
    auto report = build_timing_report(row.samples, BootstrapSettings{});
    REQUIRE_FALSE(report);
    CHECK(report.status().message().rfind(row.context, 0) == 0);
  }
}

TEST_CASE("timing JSON writes non-finite numbers as null") {
  TimingReport report;
  report.eager.median_ms = 1;
  report.eager.cv = std::numeric_limits<double>::quiet_NaN();
  report.candidate.median_ms = std::numeric_limits<double>::infinity();
  report.speedup_eager.ci_low = std::numeric_limits<double>::quiet_NaN();
  const std::string json = timing_json(report);
  CHECK(testing::is_valid_json(json));
  CHECK(json.find("NaN") == std::string::npos);
  CHECK(json.find("nan") == std::string::npos);
  CHECK(json.find("inf") == std::string::npos);
  CHECK(json.find(R"("cv":null)") != std::string::npos);
  CHECK(json.find(R"("candidate":{"median":null)") != std::string::npos);
  CHECK(json.find(R"("ci95":[null,)") != std::string::npos);
}

// The candidate's runner costs 1 us more per call than the baselines' and the baselines' cost was
// removed from its samples: a 5 us kernel identical to eager reads "slower". With the interval
// reaching up to the speedup at the runner's own cost it is "no difference", and nothing the reward
// reads moves.
TEST_CASE("reach_upper_ends widens only the upper end, towards the candidate's own call cost") {
  const double kernel_ms = 0.005, extra_ms = 0.001;
  TimingSamples at_baseline_cost = simulate_profile(kernel_ms, kernel_ms, kernel_ms, 41);
  TimingSamples at_own_cost = at_baseline_cost;
  for (auto& round : at_baseline_cost.candidate) {
    for (double& ms : round) ms += extra_ms;
  }
  auto report = build_timing_report(at_baseline_cost, BootstrapSettings{});
  auto own = build_timing_report(at_own_cost, BootstrapSettings{});
  REQUIRE(report);
  REQUIRE(own);
  TimingReport widened = report.value();
  CHECK(compare_speedup(widened.speedup_eager) == SpeedupComparison::kSlower);
  reach_upper_ends(widened, own.value());
  CHECK(compare_speedup(widened.speedup_eager) == SpeedupComparison::kNoSignificantDifference);
  REQUIRE(widened.speedup_compile);
  CHECK(compare_speedup(*widened.speedup_compile) == SpeedupComparison::kNoSignificantDifference);
  CHECK(widened.speedup_eager.ci_high == own.value().speedup_eager.ci_high);
  CHECK(widened.speedup_eager.median == report.value().speedup_eager.median);
  CHECK(widened.speedup_eager.ci_low == report.value().speedup_eager.ci_low);
  CHECK(widened.speedup_compile->ci_low == report.value().speedup_compile->ci_low);
  CHECK(milestone_reward(timing_json(widened)) == milestone_reward(timing_json(report.value())));

  // An interval already above the other one's upper end keeps its own.
  TimingReport kept = own.value();
  reach_upper_ends(kept, report.value());
  CHECK(kept.speedup_eager.ci_high == own.value().speedup_eager.ci_high);
  CHECK(kept.speedup_compile->ci_high == own.value().speedup_compile->ci_high);
}
