// Table-driven tests of the profile's sanity gates: each at, just under and just over its
// threshold, the numbers and reasons it records, and Status errors for bad facts and settings.
#include "cudaagent/profile/gates.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "test_support.h"

using namespace cudaagent;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

double number(const GateFinding& flag, const std::string& name) {
  for (const auto& n : flag.numbers) {
    if (n.name == name) return n.value;
  }
  FAIL("flag " << flag.name << " has no number " << name);
  return kNaN;
}

}  // namespace

TEST_CASE("speedup ceiling: strictly above the maximum is raised") {
  struct Row {
    double speedup, max;
    bool raised;
  };
  const Row rows[] = {
      {9.99, 10, false}, {10, 10, false}, {10.0001, 10, true}, {250, 10, true},
      {0.5, 10, false},  {5, 5, false},   {5.01, 5, true},
  };
  for (const auto& row : rows) {
    CAPTURE(row.speedup);
    CAPTURE(row.max);
    auto flag = check_speedup_ceiling("eager", row.speedup, row.max);
    REQUIRE(flag);
    CHECK(flag.value().name == "speedup_ceiling");
    CHECK(flag.value().raised == row.raised);
    CHECK(flag.value().withholds_reward == row.raised);
    CHECK(number(flag.value(), "speedup") == row.speedup);
    CHECK(number(flag.value(), "max_speedup") == row.max);
    CHECK(contains(flag.value().reason, "over eager"));
    CHECK(contains(flag.value().reason, row.raised ? "too good to be true" : "within"));
  }
  for (double bad : {kNaN, kInf, 0.0, -2.0}) {
    CAPTURE(bad);
    CHECK_FALSE(check_speedup_ceiling("eager", bad, 10));
  }
  for (double bad_max : {kNaN, kInf, 1.0, 0.5, -10.0}) {
    CAPTURE(bad_max);
    CHECK_FALSE(check_speedup_ceiling("eager", 2, bad_max));
  }
}

TEST_CASE("roofline floor: faster than bytes / bandwidth (or flops / FLOP rate) x slack is raised") {
  struct Row {
    RooflineFacts facts;
    double slack, floor_ms;
    bool raised;
  };
  // 4 GB at 4 TB/s: a 1 ms floor.
  const RooflineFacts memory{0, 4e9, 4e12, 0, 0};
  auto at = [](RooflineFacts facts, double time_ms) {
    facts.time_ms = time_ms;
    return facts;
  };
  // 2e12 FLOP at 1e15 FLOP/s: 2 ms, above the 1 ms memory floor.
  const RooflineFacts compute{0, 4e9, 4e12, 2e12, 1e15};
  const Row rows[] = {
      {at(memory, 2.0), 0.5, 1, false},
      {at(memory, 0.5), 0.5, 1, false},     // exactly slack x floor
      {at(memory, 0.4999), 0.5, 1, true},
      {at(memory, 0.01), 0.5, 1, true},     // a 100x "speedup" past physics
      {at(memory, 0.99), 1.0, 1, true},     // no slack
      {at(memory, 1.0), 1.0, 1, false},
      {at(compute, 1.5), 0.8, 2, true},     // the FLOP bound decides: threshold 1.6 ms
      {at(compute, 1.6), 0.8, 2, false},
      {RooflineFacts{2, 0, 1, 1e9, 1e12}, 1.0, 1, false},      // FLOP bound alone
      {RooflineFacts{0.9, 0, 1, 1e9, 1e12}, 1.0, 1, true},
  };
  for (const auto& row : rows) {
    CAPTURE(row.facts.time_ms);
    CAPTURE(row.slack);
    auto flag = check_roofline_floor(row.facts, row.slack);
    REQUIRE(flag);
    CHECK(flag.value().name == "roofline_floor");
    CHECK(flag.value().raised == row.raised);
    CHECK(flag.value().withholds_reward == row.raised);
    CHECK(number(flag.value(), "floor_ms") == doctest::Approx(row.floor_ms));
    CHECK(number(flag.value(), "threshold_ms") == doctest::Approx(row.floor_ms * row.slack));
    CHECK(number(flag.value(), "time_ms") == row.facts.time_ms);
  }
  CHECK(contains(check_roofline_floor(at(compute, 1.0), 0.5).value().reason, "FLOP"));
  CHECK(contains(check_roofline_floor(at(memory, 0.1), 0.5).value().reason, "bytes"));

  struct Bad {
    std::string name;
    RooflineFacts facts;
    double slack;
  };
  const Bad bad[] = {
      {"NaN time", {kNaN, 4e9, 4e12, 0, 0}, 0.5},
      {"zero time", {0, 4e9, 4e12, 0, 0}, 0.5},
      {"negative bytes", {1, -1, 4e12, 0, 0}, 0.5},
      {"NaN bytes", {1, kNaN, 4e12, 0, 0}, 0.5},
      {"zero bandwidth", {1, 4e9, 0, 0, 0}, 0.5},
      {"infinite bandwidth", {1, 4e9, kInf, 0, 0}, 0.5},
      {"flops without a rate", {1, 4e9, 4e12, 1e9, 0}, 0.5},
      {"negative flops", {1, 4e9, 4e12, -1, 1e12}, 0.5},
      {"nothing to bound", {1, 0, 4e12, 0, 0}, 0.5},
      {"slack 0", {1, 4e9, 4e12, 0, 0}, 0},
      {"slack above 1", {1, 4e9, 4e12, 0, 0}, 1.5},
      {"NaN slack", {1, 4e9, 4e12, 0, 0}, kNaN},
  };
  for (const auto& row : bad) {
    CAPTURE(row.name);
    CHECK_FALSE(check_roofline_floor(row.facts, row.slack));
  }
}

TEST_CASE("kernel_time: sum and union of kernel spans on several streams") {
  struct Row {
    std::string name;
    std::vector<KernelSpan> spans;
    double sum_ms, busy_ms;
  };
  const Row rows[] = {
      {"none", {}, 0, 0},
      {"one", {{1'000'000, 3'000'000}}, 2, 2},
      {"disjoint", {{0, 1'000'000}, {5'000'000, 6'000'000}}, 2, 2},
      {"overlapping streams", {{0, 2'000'000}, {1'000'000, 3'000'000}}, 4, 3},
      {"nested, out of order", {{2'000'000, 3'000'000}, {0, 10'000'000}}, 11, 10},
      {"touching", {{0, 1'000'000}, {1'000'000, 2'000'000}}, 2, 2},
      {"zero length", {{5, 5}}, 0, 0},
      {"chain", {{0, 2'000'000}, {1'000'000, 4'000'000}, {3'500'000, 5'000'000}, {7'000'000, 8'000'000}},
       7.5, 6},
  };
  for (const auto& row : rows) {
    CAPTURE(row.name);
    auto time = kernel_time(row.spans);
    REQUIRE(time);
    CHECK(time.value().sum_ms == doctest::Approx(row.sum_ms));
    CHECK(time.value().busy_ms == doctest::Approx(row.busy_ms));
    CHECK(time.value().kernels == static_cast<std::int64_t>(row.spans.size()));
  }
  const std::vector<KernelSpan> backwards = {{0, 10}, {20, 10}};
  auto bad = kernel_time(backwards);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.status().message(), "kernel 1 ends before it starts"));
}

TEST_CASE("timer consistency: each clock pair at and across its tolerance") {
  GateSettings settings;  // 5% + 0.01 ms; busy fraction 0.5
  struct Row {
    std::string name;
    TimerFacts facts;
    bool event_exceeds_host, kernels_exceed_event, gpu_mostly_idle;
  };
  const Row rows[] = {
      {"consistent", {10, 10.5, 9}, false, false, false},
      {"event at the host limit", {10.51, 10, 9}, false, false, false},      // 10 * 1.05 + 0.01
      {"event over the host limit", {10.52, 10, 9}, true, false, false},
      {"forged: tiny host span", {10, 1, 9}, true, false, false},
      {"kernels at the event limit", {10, 12, 10.51}, false, false, false},
      {"kernels over the event limit", {10, 12, 10.52}, false, true, false},
      {"work on an unsynchronised stream", {0.1, 0.2, 5}, false, true, false},
      {"busy exactly half", {10, 12, 5}, false, false, false},
      {"busy just under half", {10, 12, 4.99}, false, false, true},
      {"no kernels at all", {10, 12, 0}, false, false, true},
      {"host much longer than event: launch overhead", {1, 50, 0.9}, false, false, false},
  };
  for (const auto& row : rows) {
    CAPTURE(row.name);
    auto flags = check_timer_consistency(row.facts, settings);
    REQUIRE(flags);
    const auto& f = flags.value();
    REQUIRE(f.size() == 3);
    CHECK(f[0].name == "event_exceeds_host");
    CHECK(f[0].raised == row.event_exceeds_host);
    CHECK(f[0].withholds_reward == row.event_exceeds_host);
    CHECK(f[1].name == "kernels_exceed_event");
    CHECK(f[1].raised == row.kernels_exceed_event);
    CHECK(f[1].withholds_reward == row.kernels_exceed_event);
    CHECK(f[2].name == "gpu_mostly_idle");
    CHECK(f[2].raised == row.gpu_mostly_idle);
    CHECK_FALSE(f[2].withholds_reward);  // idle time slows the arm itself: a note only
    CHECK(number(f[0], "event_ms") == row.facts.event_ms);
    CHECK(number(f[0], "host_ms") == row.facts.host_ms);
    CHECK(number(f[1], "kernel_ms") == row.facts.kernel_ms);
    CHECK(number(f[2], "busy_fraction") == doctest::Approx(row.facts.kernel_ms / row.facts.event_ms));
    CHECK(withholds_reward(f) == (row.event_exceeds_host || row.kernels_exceed_event));
  }
  GateSettings strict = settings;
  strict.timer_relative_tolerance = 0;
  strict.timer_absolute_tolerance_ms = 0;
  CHECK(check_timer_consistency({10, 10, 10.000001}, strict).value()[1].raised);
  CHECK_FALSE(check_timer_consistency({10, 10, 10}, strict).value()[1].raised);

  struct Bad {
    std::string name;
    TimerFacts facts;
    GateSettings settings;
  };
  GateSettings negative_tolerance = settings;
  negative_tolerance.timer_relative_tolerance = -0.1;
  GateSettings nan_tolerance = settings;
  nan_tolerance.timer_absolute_tolerance_ms = kNaN;
  GateSettings busy_above_one = settings;
  busy_above_one.min_busy_fraction = 1.5;
  const Bad bad[] = {
      {"NaN event", {kNaN, 1, 1}, settings},
      {"zero event", {0, 1, 1}, settings},
      {"infinite host", {1, kInf, 1}, settings},
      {"negative host", {1, -1, 1}, settings},
      {"negative kernels", {1, 1, -0.1}, settings},
      {"NaN kernels", {1, 1, kNaN}, settings},
      {"negative tolerance", {1, 1, 1}, negative_tolerance},
      {"NaN tolerance", {1, 1, 1}, nan_tolerance},
      {"busy fraction above 1", {1, 1, 1}, busy_above_one},
      {"NaN busy window", {1, 1, 1, 1, kNaN}, settings},
      {"negative busy kernels", {1, 1, 1, -1, 1}, settings},
      {"infinite busy window", {1, 1, 1, 1, kInf}, settings},
  };
  for (const auto& row : bad) {
    CAPTURE(row.name);
    CHECK_FALSE(check_timer_consistency(row.facts, row.settings));
  }
}

TEST_CASE("timer consistency: a busy basis of its own decides the idle note, never a withholding gate") {
  GateSettings settings;  // busy fraction 0.5
  // 2 ms of kernels in 10 ms of calls is idle; judged on the 3 ms left after warm-up and call
  // costs it is not, and the other way round.
  auto flags = check_timer_consistency({10, 10.5, 2, 2, 3}, settings).value();
  CHECK_FALSE(flags[2].raised);
  CHECK(number(flags[2], "busy_fraction") == doctest::Approx(2.0 / 3.0));
  CHECK(number(flags[2], "event_ms") == doctest::Approx(3.0));
  CHECK(contains(flags[2].reason, "cost of a call"));
  flags = check_timer_consistency({10, 10.5, 9, 1, 8}, settings).value();
  CHECK(flags[2].raised);
  CHECK(number(flags[2], "kernel_ms") == doctest::Approx(1.0));
  // The withholding gates still read the whole block: kernels over the events withhold whatever
  // the basis says.
  flags = check_timer_consistency({10, 12, 11, 1, 1}, settings).value();
  CHECK(flags[1].raised);
  CHECK_FALSE(flags[2].raised);
  // No window left (every call a warm-up, or no dearer than a null call): nothing to judge.
  flags = check_timer_consistency({10, 12, 0, 0, 0}, settings).value();
  CHECK_FALSE(flags[2].raised);
  CHECK(contains(flags[2].reason, "no timed window"));
}

TEST_CASE("clock stability: a spread above the maximum change is raised") {
  struct Row {
    std::vector<double> readings;
    double max_change;
    bool raised;
    double change;
  };
  const Row rows[] = {
      {{1980, 1980}, 0.05, false, 0},
      {{2000, 1900}, 0.05, false, 0.05},  // exactly 5%
      {{2000, 1899}, 0.05, true, 0.0505},
      {{1900, 2000}, 0.05, false, 0.05},  // rising counts the same
      {{1980, 1755, 1980}, 0.05, true, 225.0 / 1980},  // dipped during the block
      {{1980, 1975}, 0, true, 5.0 / 1980},
  };
  for (const auto& row : rows) {
    CAPTURE(row.readings.size());
    CAPTURE(row.change);
    auto flag = check_clock_stability("sm", row.readings, row.max_change);
    REQUIRE(flag);
    CHECK(flag.value().name == "clock_moved");
    CHECK(flag.value().raised == row.raised);
    CHECK(flag.value().withholds_reward == row.raised);
    CHECK(number(flag.value(), "change") == doctest::Approx(row.change));
    CHECK(contains(flag.value().reason, "sm clock"));
  }
  struct Bad {
    std::string name;
    std::vector<double> readings;
    double max_change;
  };
  const Bad bad[] = {
      {"no readings", {}, 0.05},         {"one reading", {1980}, 0.05},
      {"NaN reading", {1980, kNaN}, 0.05}, {"zero reading", {0, 1980}, 0.05},
      {"negative max", {1980, 1980}, -0.1}, {"max of 1", {1980, 1980}, 1},
      {"NaN max", {1980, 1980}, kNaN},
  };
  for (const auto& row : bad) {
    CAPTURE(row.name);
    CHECK_FALSE(check_clock_stability("sm", row.readings, row.max_change));
  }
}

TEST_CASE("withholding: only raised gates that withhold count, JSON records every gate") {
  std::vector<GateFinding> flags;
  flags.push_back(check_speedup_ceiling("eager", 3, 10).value());
  auto timers = check_timer_consistency({10, 12, 1}, GateSettings{}).value();  // idle: a note
  flags.insert(flags.end(), timers.begin(), timers.end());
  CHECK_FALSE(withholds_reward(flags));
  CHECK(withholding_reason(flags).empty());
  CHECK(flags[3].raised);

  flags.push_back(check_clock_stability("memory", std::vector<double>{2619, 1593}, 0.05).value());
  flags.push_back(check_speedup_ceiling("eager", 40, 10).value());
  CHECK(withholds_reward(flags));
  CHECK(withholding_reason(flags).rfind("clock_moved: memory clock", 0) == 0);

  std::string json;
  JsonWriter writer(json);
  write_gate_findings(writer, flags);
  REQUIRE(testing::is_valid_json(json));
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  REQUIRE(parser.parse(json).get(root) == simdjson::SUCCESS);
  std::string_view name;
  bool raised = false;
  double max_speedup = 0;
  CHECK(root.at_pointer("/5/name").get(name) == simdjson::SUCCESS);
  CHECK(name == "speedup_ceiling");
  CHECK(root.at_pointer("/5/raised").get(raised) == simdjson::SUCCESS);
  CHECK(raised);
  CHECK(root.at_pointer("/5/numbers/max_speedup").get(max_speedup) == simdjson::SUCCESS);
  CHECK(max_speedup == 10);
  CHECK(root.at_pointer("/" + std::to_string(flags.size() - 1)).error() == simdjson::SUCCESS);
  CHECK(root.at_pointer("/" + std::to_string(flags.size())).error() != simdjson::SUCCESS);

  std::vector<GateFinding> odd = {{"odd", true, false, "a \"quoted\" reason", {{"x", kNaN}}}};
  std::string odd_json;
  JsonWriter odd_writer(odd_json);
  write_gate_findings(odd_writer, odd);
  CHECK(testing::is_valid_json(odd_json));
  CHECK(contains(odd_json, R"("x":null)"));
}
