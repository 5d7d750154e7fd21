// The summary's figures against hand-computed ones (KernelBench's definitions of fast_p and the
// geometric mean), its text and JSON, the plots as well-formed SVG, the SVG writer's escaping and
// ticks, and the KernelBench export.
#include "cudaagent/reward/summary.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "cudaagent/reward/kernelbench.h"
#include "cudaagent/reward/svg.h"
#include "test_support.h"

namespace cudaagent {
namespace {

ScoredRecord scored(std::string level, std::string verdict, double reward,
                    std::optional<double> eager = {}, std::optional<double> compile = {}) {
  ScoredRecord r;
  r.level = std::move(level);
  r.verdict = std::move(verdict);
  r.reward = reward;
  r.form = "milestone";
  r.speedup_eager = eager;
  r.speedup_compile = compile;
  return r;
}

ResultSummary example() {
  ResultSummary summary;
  summary.add(scored("1", "PASS", 3, 2.0, 1.2));
  summary.add(scored("1", "PASS", 1, 0.5, 0.4));
  summary.add(scored("2", "PASS", 2, 1.6, 0.9));
  summary.add(scored("2", "FAIL_INCORRECT", -1));
  summary.add_unscored("error record");
  return summary;
}

TEST_CASE("fast_p and the geometric mean follow KernelBench's definitions") {
  const ResultSummary summary = example();
  const SummaryGroup& all = summary.all();
  CHECK(all.records == 4);
  CHECK(all.pass_rate() == doctest::Approx(0.75));
  CHECK(all.fast_p(all.eager, 0) == doctest::Approx(0.75));    // fast_0: correct
  CHECK(all.fast_p(all.eager, 1.0) == doctest::Approx(0.5));   // 2.0 and 1.6 of 4 records
  CHECK(all.fast_p(all.eager, 1.6) == doctest::Approx(0.25));  // strictly above p
  CHECK(all.fast_p(all.compile, 1.0) == doctest::Approx(0.25));
  CHECK(*SummaryGroup::geomean(all.eager) == doctest::Approx(std::cbrt(2.0 * 0.5 * 1.6)));
  CHECK_FALSE(SummaryGroup::geomean({}).has_value());
  REQUIRE(summary.levels().size() == 2);
  CHECK(summary.levels().at("2").pass_rate() == doctest::Approx(0.5));
  CHECK(all.rewards.at(-1) == 1);
}

TEST_CASE("the report says what each number is, and the JSON holds the same figures") {
  const ResultSummary summary = example();
  const std::string text = summary.text();
  CHECK(text.find("scored records: 4 (and 1 not scored: error record 1)") == 0);
  CHECK(text.find("pass rate: 75.0% (3 of 4)") != std::string::npos);
  CHECK(text.find("fast_1            50.0%                 25.0%") != std::string::npos);
  CHECK(text.find("What the numbers mean") != std::string::npos);
  CHECK(text.find("per level") != std::string::npos);
  const std::string json = summary.json();
  REQUIRE(testing::is_valid_json(json));
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.parse(json);
  CHECK(double(root["all"]["speedup"]["eager"]["fast_p"]["1"]) == doctest::Approx(0.5));
  CHECK(int64_t(root["levels"]["2"]["records"]) == 2);
  CHECK(int64_t(root["not_scored"]) == 1);
}

TEST_CASE("read_scored_record takes the reward key and the task's level") {
  simdjson::dom::parser parser;
  simdjson::dom::object record = parser.parse(std::string(
      R"({"id":"a","task":{"meta":{"level":2}},"reward":{"form":"milestone","value":2,"verdict":"PASS",)"
      R"("inputs":{"eager":{"speedup":1.5},"compile":null}}})"));
  auto read = read_scored_record(record);
  REQUIRE(read);
  CHECK(read.value().level == "2");
  CHECK(read.value().reward == 2);
  CHECK(*read.value().speedup_eager == 1.5);
  CHECK_FALSE(read.value().speedup_compile);
  simdjson::dom::parser other;
  CHECK_FALSE(read_scored_record(other.parse(std::string(R"({"error":{"reason":"x"}})"))));
  CHECK_FALSE(read_scored_record(other.parse(std::string(R"({"id":"b","verify":{}})"))));
}

TEST_CASE("the plots are well-formed SVG documents with escaped text") {
  testing::TempDir dir;
  auto written = example().write_plots(dir.file("plots"));
  REQUIRE_MESSAGE(written, written.status().message());
  CHECK(written.value().size() == 3);  // rewards, fast_p, levels
  for (const std::string& path : written.value()) {
    const std::string svg = testing::read_file(path);
    CHECK(svg.find("<?xml") == 0);
    CHECK(svg.find("</svg>") != std::string::npos);
  }
  Svg svg(10, 10);
  svg.text(1, 1, "a < b & \"c\"");
  CHECK(svg.str().find(">a &lt; b &amp; &quot;c&quot;</text>") != std::string::npos);
  const std::vector<double> unit = nice_ticks(0, 1);
  REQUIRE(unit.size() == 6);
  for (std::size_t i = 0; i < unit.size(); ++i) CHECK(unit[i] == doctest::Approx(0.2 * static_cast<double>(i)));
  CHECK(nice_ticks(0, 37) == std::vector<double>{0, 10, 20, 30});
  CHECK(svg_number(0.6000000000000001) == "0.6");
}

TEST_CASE("the KernelBench export writes eval_results per level and the baseline timing files") {
  simdjson::dom::parser parser;
  KernelBenchExport out;
  const std::string pass =
      R"({"id":"c1","task":{"meta":{"level":1,"problem_id":19,"name":"19_ReLU"}},)"
      R"("verify":{"verdict":"PASS","build":{"ok":true}},)"
      R"("profile":{"times_ms":{"eager":{"median":2,"mean":2.1,"min":1.9,"max":2.5,"cv":0.1,"trials":100},)"
      R"("compile":{"median":1.5,"mean":1.6,"min":1.4,"max":1.9,"cv":0.05,"trials":100},)"
      R"("candidate":{"median":1,"mean":1.1,"min":0.9,"max":1.3,"cv":0.2,"trials":100}},)"
      R"("baselines":{"compile":{"mode":"default"}}},"reward":{"value":3,"verdict":"PASS"}})";
  const std::string fail =
      R"({"id":"c2","task":{"meta":{"level":1,"problem_id":19,"name":"19_ReLU"}},)"
      R"("verify":{"verdict":"FAIL_COMPILE","build":{"ok":false}},"reward":{"value":-1,"verdict":"FAIL_COMPILE"}})";
  REQUIRE(out.add(parser.parse(pass)));
  simdjson::dom::parser second;
  REQUIRE(out.add(second.parse(fail)));
  simdjson::dom::parser third;
  CHECK_FALSE(out.add(third.parse(std::string(R"({"id":"x","reward":{"verdict":"PASS"}})"))));
  testing::TempDir dir;
  auto written = out.write(dir.path().string());
  REQUIRE_MESSAGE(written, written.status().message());
  simdjson::dom::parser reader;
  simdjson::dom::element results = reader.load(dir.file("level1/eval_results.json"));
  simdjson::dom::array samples = results["19"];
  REQUIRE(samples.size() == 2);
  CHECK(int64_t(samples.at(0)["sample_id"]) == 0);
  CHECK(bool(samples.at(0)["correctness"]));
  CHECK(double(samples.at(0)["runtime"]) == doctest::Approx(1.1));
  CHECK(double(samples.at(0)["runtime_stats"]["std"]) == doctest::Approx(0.22));
  CHECK_FALSE(bool(samples.at(1)["compiled"]));
  CHECK(double(samples.at(1)["runtime"]) == -1.0);
  simdjson::dom::parser timing;
  simdjson::dom::element eager = timing.load(dir.file("timing/baseline_time_torch.json"));
  CHECK(double(eager["level1"]["19_ReLU.py"]["mean"]) == doctest::Approx(2.1));
  CHECK(std::filesystem::exists(dir.file("timing/baseline_time_torch_compile_inductor_default.json")));
}

}  // namespace
}  // namespace cudaagent
