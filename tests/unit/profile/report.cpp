// The pure parts of cudaagent-profile: calls per round, the unpaired speedup, the cached baseline
// entry, the --brief text.
#include "cudaagent/profile/report.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace cudaagent {
namespace {

TEST_CASE("calls per round follow the time target within the bounds and the input pool") {
  CHECK(calls_per_round(1.0, 20, 3, 200, 0, 0) == 20);
  CHECK(calls_per_round(0.01, 20, 3, 200, 0, 0) == 200);      // capped
  CHECK(calls_per_round(100.0, 20, 3, 200, 0, 0) == 3);       // at least min_calls
  CHECK(calls_per_round(1.0, 20, 3, 200, 1e9, 4e9) == 4);     // four input sets fit the pool
  CHECK(calls_per_round(1.0, 20, 3, 200, 1e9, 1e9) == 3);     // never below min_calls
  CHECK(calls_per_round(0.0, 20, 3, 200, 0, 0) == 200);
  CHECK(calls_per_round(std::nan(""), 20, 3, 200, 0, 0) == 200);
}

TEST_CASE("the unpaired speedup is the ratio of medians with the conservative interval ratio") {
  TimeSummary base, cand;
  base.median_ms = 10, base.ci_low_ms = 9, base.ci_high_ms = 11;
  cand.median_ms = 5, cand.ci_low_ms = 4, cand.ci_high_ms = 6, cand.rounds = 7;
  const SpeedupSummary s = unpaired_speedup(base, cand);
  CHECK(s.median == doctest::Approx(2.0));
  CHECK(s.ci_low == doctest::Approx(1.5));
  CHECK(s.ci_high == doctest::Approx(2.75));
  CHECK(s.rounds == 7);
  CHECK(s.round_ratios.empty());
}

TEST_CASE("a cached baseline entry reads back as written, and a damaged one is refused") {
  BaselineSamples samples;
  samples.eager = {{1.0, 1.1}, {1.2, 0.9}};
  samples.compile = {{0.5, 0.6}, {0.55, 0.5}};
  samples.compile_status = "measured";
  samples.calls_per_round = 2;
  samples.input_bytes = 4096;
  samples.output_bytes = 2048;
  samples.device_json = R"({"type":"cuda","l2_bytes":62914560})";
  const std::string json = baseline_json(samples);
  auto back = parse_baseline(json);
  REQUIRE_MESSAGE(back, back.status().message());
  CHECK(back.value().eager == samples.eager);
  CHECK(back.value().compile == samples.compile);
  CHECK(back.value().calls_per_round == 2);
  CHECK(back.value().device_json == samples.device_json);
  CHECK(baseline_json(back.value()) == json);
  samples.compile.clear();
  samples.compile_status = "unavailable: torch 1.13.0 has no torch.compile";
  back = parse_baseline(baseline_json(samples));
  REQUIRE(back);
  CHECK(back.value().compile.empty());
  CHECK_FALSE(parse_baseline("{}"));
  CHECK_FALSE(parse_baseline("not json"));
  std::string one_round = baseline_json(samples);
  one_round.replace(one_round.find("[[1,1.1],[1.2,0.9]]"), 19, "[[1,1.1]]");
  CHECK_FALSE(parse_baseline(one_round));  // a baseline of one round has no interval
}

TEST_CASE("the brief text names the verdict, times, speedups, raised flags and hints") {
  const std::string profile = R"({"verdict":"FLAG_HACK","reason":"too fast",
    "times_ms":{"eager":{"median":2,"ci95":[1.9,2.1],"cv":0.01,"rounds":10,"trials":100},
                "compile":null,
                "candidate":{"median":0.1,"ci95":[0.09,0.11],"cv":0.2,"rounds":10,"trials":100}},
    "speedup":{"eager":{"median":20,"ci95":[18,22]},"compile":null},
    "comparison":{"eager":"faster"},
    "baselines":{"compile":{"status":"unavailable: no torch.compile"}},
    "flags":[{"name":"speedup_ceiling","raised":true,"reason":"20x over eager"},
             {"name":"roofline_floor","raised":false,"reason":"fine"}],
    "kernels":null})";
  simdjson::dom::parser parser;
  simdjson::dom::element value;
  REQUIRE_FALSE(parser.parse(profile).get(value));
  const std::string text = brief_text(value);
  CHECK(text.find("verdict: FLAG_HACK (too fast)") != std::string::npos);
  CHECK(text.find("candidate  100.0 us") != std::string::npos);
  CHECK(text.find("eager      2.000 ms") != std::string::npos);
  CHECK(text.find("speedup over eager   20x") != std::string::npos);
  CHECK(text.find("flags: speedup_ceiling\n") != std::string::npos);
  CHECK(text.find("look at: speedup_ceiling: 20x over eager") != std::string::npos);
  CHECK(text.find("CV above 5%") != std::string::npos);
  CHECK(text.find("roofline_floor") == std::string::npos);
  CHECK(text.find("kernel table: not traced") != std::string::npos);
  REQUIRE_FALSE(parser.parse(std::string(R"({"verdict":"INFRA_ERROR"})")).get(value));
  CHECK(brief_text(value).rfind("verdict: INFRA_ERROR\n", 0) == 0);
}

TEST_CASE("the brief text lists the traced top kernels") {
  const std::string profile = R"json({"verdict":"PASS","reason":"timed","flags":[],
    "kernels":[{"name":"bias_relu_kernel(float const*, float*)","kind":"kernel","class":"candidate",
                "class_by_name":false,"launcher":"/w/cuda_extension.so","calls":40,"total_ms":1.25,
                "mean_us":31.25,"share":0.875},
               {"name":"at::native::fill_kernel","kind":"kernel","class":"torch","class_by_name":false,
                "launcher":"/t/libtorch_cuda.so","calls":40,"total_ms":0.18,"mean_us":4.5,"share":0.125}]})json";
  simdjson::dom::parser parser;
  simdjson::dom::element value;
  REQUIRE_FALSE(parser.parse(profile).get(value));
  const std::string text = brief_text(value);
  CHECK(text.find("kernels (timed calls, top 2):\n") != std::string::npos);
  CHECK(text.find("   87.5%      1.250 ms      40 calls  candidate    bias_relu_kernel(float const*, float*)\n") !=
        std::string::npos);
  CHECK(text.find("torch        at::native::fill_kernel") != std::string::npos);
  CHECK(text.find("not traced") == std::string::npos);
}

}  // namespace
}  // namespace cudaagent
