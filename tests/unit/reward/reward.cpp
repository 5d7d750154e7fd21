// Table-driven tests of the reward decision: every verdict, the exact margin boundaries, interval
// gating, null and missing fields, and the ablation forms.
#include "cudaagent/reward/reward.h"

#include <doctest/doctest.h>

#include <cmath>

#include "cudaagent/records/line_reader.h"
#include "test_support.h"

using namespace cudaagent;

namespace {

struct Outcome {
  bool ok = false;
  double value = 0;
  std::string message;  // reason (ok) or error (not ok)
};

Outcome score(const std::string& record, const RewardSettings& settings = {}) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  REQUIRE(parser.parse(record).get(object) == simdjson::SUCCESS);
  auto inputs = read_reward_inputs(object);
  if (!inputs) return {false, 0, inputs.status().message()};
  auto decision = decide_reward(inputs.value(), settings);
  if (!decision) return {false, 0, decision.status().message()};
  const std::string json = reward_json(inputs.value(), decision.value(), settings);
  CHECK(testing::is_valid_json(json));
  return {true, decision.value().value, decision.value().reason};
}

// A PASS record timed by medians only (no intervals).
std::string pass_times(double eager, double compile, double candidate) {
  return R"({"id":"t","verify":{"verdict":"PASS"},"profile":{"times_ms":{"eager":{"median":)" +
         std::to_string(eager) + R"(},"compile":{"median":)" + std::to_string(compile) +
         R"(},"candidate":{"median":)" + std::to_string(candidate) + "}}}}";
}

}  // namespace

TEST_CASE("every non-PASS verdict scores -1 in the milestone form, INFRA_ERROR is not scored") {
  for (const char* verdict : {"FAIL_COMPILE", "FAIL_INCORRECT", "FAIL_RUNTIME", "FAIL_TIMEOUT",
                              "FAIL_RESOURCE", "REJECT_POLICY", "FLAG_HACK"}) {
    CAPTURE(verdict);
    const auto outcome = score(std::string(R"({"verify":{"verdict":")") + verdict + "\"}}");
    REQUIRE(outcome.ok);
    CHECK(outcome.value == -1);
  }
  const auto infra = score(R"({"verify":{"verdict":"INFRA_ERROR"}})");
  CHECK_FALSE(infra.ok);
  CHECK(infra.message.find("INFRA_ERROR") != std::string::npos);
  CHECK(infra.message.find("retry") != std::string::npos);
}

TEST_CASE("milestone tiers at the exact 5% boundaries") {
  struct Row {
    double eager, compile, candidate, reward;
  };
  // Time saved = (base - candidate) / base must be > 5%: exactly 5% does not count.
  const Row rows[] = {
      {100, 100, 95, 1},      // saved exactly 5% of both: not faster
      {100, 100, 94.9, 3},    // just over 5% of both
      {100, 96, 94.9, 2},     // over 5% of eager, 1.1% of compile
      {100, 99.9, 94.9, 3},   // over 5% of both
      {100, 50, 94.9, 2},     // compile far faster than the candidate
      {100, 100, 100, 1},     // no speedup at all
      {100, 100, 200, 1},     // slower than both: still a correct kernel
      {1, 1, 0.1, 3},         // 10x: the reward does not judge plausibility (profile flags it)
  };
  for (const auto& row : rows) {
    CAPTURE(row.eager);
    CAPTURE(row.compile);
    CAPTURE(row.candidate);
    const auto outcome = score(pass_times(row.eager, row.compile, row.candidate));
    REQUIRE(outcome.ok);
    CHECK(outcome.value == row.reward);
  }
}

TEST_CASE("the margin is configurable and 0 means strictly faster") {
  RewardSettings zero;
  zero.margin = 0;
  CHECK(score(pass_times(100, 100, 99.99), zero).value == 3);
  CHECK(score(pass_times(100, 100, 100), zero).value == 1);
  RewardSettings ten;
  ten.margin = 0.10;
  CHECK(score(pass_times(100, 100, 90), ten).value == 1);
  CHECK(score(pass_times(100, 100, 89.9), ten).value == 3);
}

TEST_CASE("a speedup counts only when its lower confidence bound clears the margin") {
  const std::string noisy = R"({"verify":{"verdict":"PASS"},"profile":{"speedup":{
      "eager":{"median":1.30,"ci95":[1.02,1.6]},"compile":{"median":1.2,"ci95":[1.10,1.3]}}}})";
  CHECK(score(noisy).value == 1);  // eager's lower bound saves only 2%
  const std::string tight = R"({"verify":{"verdict":"PASS"},"profile":{"speedup":{
      "eager":{"median":1.30,"ci95":[1.25,1.35]},"compile":{"median":1.2,"ci95":[1.05,1.3]}}}})";
  CHECK(score(tight).value == 2);  // compile's lower bound 1.05 saves 4.8% < 5%
  const std::string both = R"({"verify":{"verdict":"PASS"},"profile":{"speedup":{
      "eager":{"median":1.30,"ci95":[1.25,1.35]},"compile":{"median":1.2,"ci95":[1.06,1.3]}}}})";
  CHECK(score(both).value == 3);
}

TEST_CASE("time intervals give a conservative speedup bound") {
  // Point speedups are 2x, but slowest candidate / fastest baseline is 1.0: not faster.
  const std::string record = R"({"verify":{"verdict":"PASS"},"profile":{"times_ms":{
      "eager":{"median":2.0,"ci95":[1.5,2.5]},"compile":{"median":2.0,"ci95":[1.5,2.5]},
      "candidate":{"median":1.0,"ci95":[0.5,1.5]}}}})";
  CHECK(score(record).value == 1);
}

TEST_CASE("a profile verdict overrides PASS, it cannot raise a failure") {
  CHECK(score(R"({"verify":{"verdict":"PASS"},"profile":{"verdict":"FLAG_HACK",
      "speedup":{"eager":{"median":50},"compile":{"median":40}}}})").value == -1);
  CHECK(score(R"({"verify":{"verdict":"FAIL_INCORRECT"},"profile":{"verdict":"PASS"}})").value == -1);
  CHECK_FALSE(score(R"({"verify":{"verdict":"PASS"},"profile":{"verdict":"INFRA_ERROR"}})").ok);
}

TEST_CASE("missing, null and malformed fields are errors with a reason") {
  struct Case {
    const char* record;
    const char* reason;
  };
  const Case cases[] = {
      {R"({"id":"x"})", "no 'verify'"},
      {R"({"verify":{}})", "verify.verdict is missing"},
      {R"({"verify":{"verdict":3}})", "verify.verdict is missing or not a string"},
      {R"({"verify":{"verdict":"pass"}})", "is not a verdict"},
      {R"({"verify":{"verdict":"PASS"}})", "no 'profile'"},
      {R"({"verify":{"verdict":"PASS"},"profile":{}})", "neither speedup.eager nor times_ms"},
      {R"({"verify":{"verdict":"PASS"},"profile":{"times_ms":{"eager":{"median":1}}}})",
       "times_ms.candidate is missing"},
      {R"({"verify":{"verdict":"PASS"},"profile":{"times_ms":{"eager":{"median":null},
          "candidate":{"median":1}}}})", "eager.median is null"},
      {R"({"verify":{"verdict":"PASS"},"profile":{"times_ms":{"eager":{"median":0},
          "candidate":{"median":1}}}})", "must be positive"},
      {R"({"verify":{"verdict":"PASS"},"profile":{"times_ms":{"eager":{"median":"1"},
          "candidate":{"median":1}}}})", "is not a number"},
      {R"({"verify":{"verdict":"PASS"},"profile":{"times_ms":{"eager":{"median":1,"ci95":[2,1]},
          "candidate":{"median":1}}}})", "0 < low <= high"},
      {R"({"verify":{"verdict":"PASS"},"profile":{"speedup":{"eager":{"median":-2}}}})",
       "must be positive"},
      {R"({"verify":{"verdict":"PASS"},"profile":{"speedup":{"eager":{"median":2,"ci95":[1]}}}})",
       "must be [low, high]"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.record);
    const auto outcome = score(c.record);
    REQUIRE_FALSE(outcome.ok);
    CHECK(outcome.message.find(c.reason) != std::string::npos);
  }
}

TEST_CASE("a compile baseline that was not measured caps the milestone at 2") {
  const std::string record = R"({"verify":{"verdict":"PASS"},"profile":{"times_ms":{
      "eager":{"median":10},"compile":null,"candidate":{"median":1}}}})";
  const auto outcome = score(record);
  REQUIRE(outcome.ok);
  CHECK(outcome.value == 2);
  CHECK(outcome.message.find("not measured") != std::string::npos);
}

TEST_CASE("speedup and log-speedup forms for ablations") {
  RewardSettings speedup;
  speedup.form = RewardForm::kSpeedup;
  CHECK(score(pass_times(10, 8, 2), speedup).value == doctest::Approx(4.0));
  speedup.baseline = "eager";
  CHECK(score(pass_times(10, 8, 2), speedup).value == doctest::Approx(5.0));
  CHECK(score(R"({"verify":{"verdict":"FAIL_RUNTIME"}})", speedup).value == 0);

  RewardSettings log_form;
  log_form.form = RewardForm::kLogSpeedup;
  log_form.fail_value = -1;
  CHECK(score(pass_times(10, 8, 2), log_form).value == doctest::Approx(std::log(4.0)));
  // A very slow correct kernel never scores below a failure.
  CHECK(score(pass_times(10, 8, 100), log_form).value == -1);
  CHECK(score(R"({"verify":{"verdict":"FLAG_HACK"}})", log_form).value == -1);
}

TEST_CASE("speedup intervals: exactly at the margin does not count") {
  // 1/(1-0.05) is the speedup that saves 5%; 1.0526 saves slightly less, 1.0527 slightly more.
  const auto at = [](double lower) {
    return R"({"verify":{"verdict":"PASS"},"profile":{"speedup":{"eager":{"median":2,"ci95":[)" +
           std::to_string(lower) + R"(,3]},"compile":{"median":2,"ci95":[)" +
           std::to_string(lower) + ",3]}}}}";
  };
  CHECK(score(at(1.0526)).value == 1);
  CHECK(score(at(1.0527)).value == 3);
}

TEST_CASE("clears_margin compares time saved against the margin") {
  CHECK_FALSE(clears_margin({1.05, 1.05, false, "speedup", 1 - 1 / 1.05}, 0.05));  // 4.76%
  CHECK(clears_margin({1.06, 1.06, false, "speedup", 1 - 1 / 1.06}, 0.05));        // 5.66%
  CHECK_FALSE(clears_margin({2.0, 1.0, true, "speedup", 0.0}, 0.0));  // lower bound decides
}

TEST_CASE("a profile timed with several forwards per call is scored only for trusted code") {
  // Several forwards per call leave later slots' inputs readable from the call's start.
  const auto with_forwards = [](const std::string& section, const std::string& forwards) {
    return R"({"verify":{"verdict":"PASS"},"profile":{")" + section + R"(":{"forwards_per_call":)" +
           forwards + R"(},"times_ms":{"eager":{"median":2},"compile":{"median":2},"candidate":{"median":1}}}})";
  };
  for (const char* section : {"checks", "settings"}) {
    CAPTURE(section);
    const auto refused = score(with_forwards(section, "8"));
    CHECK_FALSE(refused.ok);
    CHECK(refused.message.find("8 forwards per call") != std::string::npos);
    CHECK(refused.message.find("--trusted-code") != std::string::npos);
    RewardSettings trusted;
    trusted.trusted_code = true;
    const auto scored = score(with_forwards(section, "8"), trusted);
    REQUIRE(scored.ok);
    CHECK(scored.value == 3);
    const auto one = score(with_forwards(section, "1"));
    REQUIRE(one.ok);
    CHECK(one.value == 3);
    for (const char* bad : {"0", "-2", "1.5", "\"8\""}) {
      CAPTURE(bad);
      const auto malformed = score(with_forwards(section, bad));
      CHECK_FALSE(malformed.ok);
      CHECK(malformed.message.find("forwards_per_call must be a positive integer") != std::string::npos);
    }
  }
  // The forwards actually used (checks) decide over the forwards asked for (settings).
  const auto used_one = score(R"({"verify":{"verdict":"PASS"},"profile":{"checks":{"forwards_per_call":1},)"
                              R"("settings":{"forwards_per_call":8},"times_ms":{"eager":{"median":2},)"
                              R"("compile":{"median":2},"candidate":{"median":1}}}})");
  REQUIRE(used_one.ok);
  // A failed candidate is scored whatever the timing settings: nothing was timed for its reward.
  const auto failed = score(R"({"verify":{"verdict":"FAIL_INCORRECT"},"profile":{"checks":{"forwards_per_call":8}}})");
  REQUIRE(failed.ok);
  CHECK(failed.value == -1);
}
