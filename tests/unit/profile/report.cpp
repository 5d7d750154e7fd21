// The pure parts of cudaagent-profile: calls per round, the unpaired speedup, the host-clock gate
// on the candidate's timer, output fingerprints, the cached baseline entry, the --brief text.
#include "cudaagent/profile/report.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace cudaagent {
namespace {

TensorTree float_tensor(std::vector<float> values) {
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return TensorTree::tensor(DType::kFloat32, {static_cast<std::int64_t>(values.size())}, std::move(bytes));
}

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

TEST_CASE("the host overhead gate catches a timer that leaves out what the host clock saw") {
  const RoundClocks baseline{{10, 10, 10, 10}, {15, 15, 16, 15}};  // 5 ms of harness per round
  RoundClocks honest{{20, 21, 20, 20}, {25.5, 26, 25, 26}};
  auto flag = check_host_overhead(honest, baseline, OverheadSettings{});
  REQUIRE(flag);
  CHECK_FALSE(flag.value().raised);
  CHECK(flag.value().name == "host_overhead_excess");
  // Reports a tenth of the 20 ms it took: 18 ms per round the harness cannot explain.
  const RoundClocks forged{{2, 2, 2, 2}, {25, 25.5, 25, 26}};
  flag = check_host_overhead(forged, baseline, OverheadSettings{});
  REQUIRE(flag);
  CHECK(flag.value().raised);
  CHECK(flag.value().withholds_reward);
  CHECK(flag.value().numbers.at(3).name == "excess_ms");
  CHECK(flag.value().numbers.at(3).value == doctest::Approx(23.25 - 5.0));
  // One disturbed round moves no median.
  RoundClocks disturbed = honest;
  disturbed.host_ms[2] = 500;
  flag = check_host_overhead(disturbed, baseline, OverheadSettings{});
  REQUIRE(flag);
  CHECK_FALSE(flag.value().raised);
  // Large, noisy harness overheads widen the tolerance (relative_overhead).
  const RoundClocks slow_base{{10, 10, 10}, {110, 110, 110}};
  const RoundClocks slow_cand{{10, 10, 10}, {130, 130, 130}};
  flag = check_host_overhead(slow_cand, slow_base, OverheadSettings{});
  REQUIRE(flag);
  CHECK_FALSE(flag.value().raised);  // 20 ms excess <= 50% of 100 ms
  // Round by round: a slow phase that lengthens both arms' round r cancels.
  const RoundClocks base_phases{{10, 10, 10}, {15, 60, 15}};
  const RoundClocks cand_phases{{10, 10, 10}, {16, 61, 40}};
  flag = check_host_overhead(cand_phases, base_phases, OverheadSettings{});
  REQUIRE(flag);
  CHECK(flag.value().numbers.at(3).value == doctest::Approx(1.0));
  CHECK_FALSE(check_host_overhead(RoundClocks{}, baseline, OverheadSettings{}));
  CHECK_FALSE(check_host_overhead(RoundClocks{{1}, {1, 2}}, baseline, OverheadSettings{}));
  CHECK_FALSE(check_host_overhead(RoundClocks{{std::nan("")}, {1}}, baseline, OverheadSettings{}));
  OverheadSettings bad;
  bad.absolute_ms = -1;
  CHECK_FALSE(check_host_overhead(honest, baseline, bad));
}

TEST_CASE("output fingerprints sum every element and match the reported sum within rounding") {
  const TensorTree out = TensorTree::tuple({float_tensor({1.5f, -2.0f, 4.0f}), TensorTree::integer(3),
                                            TensorTree::floating(0.25)});
  const OutputFingerprint fp = output_fingerprint(out);
  CHECK(fp.finite);
  CHECK(fp.sum == doctest::Approx(6.75));
  CHECK(fp.magnitude == doctest::Approx(10.75));
  CHECK(fingerprint_matches(6.75, fp));
  CHECK(fingerprint_matches(6.75 + 1e-9, fp));
  CHECK_FALSE(fingerprint_matches(6.7, fp));
  CHECK_FALSE(fingerprint_matches(std::nullopt, fp));
  const OutputFingerprint nan = output_fingerprint(float_tensor({1.0f, std::numeric_limits<float>::quiet_NaN()}));
  CHECK_FALSE(nan.finite);
  CHECK(fingerprint_matches(std::nullopt, nan));
  CHECK_FALSE(fingerprint_matches(1.0, nan));
  // Zeros where the output should be: the lazy candidate's garbage.
  CHECK_FALSE(fingerprint_matches(0.0, output_fingerprint(float_tensor({0.5f, 2.0f}))));
}

TEST_CASE("a cached baseline entry reads back as written, and a damaged one is refused") {
  BaselineSamples samples;
  samples.eager = {{1.0, 1.1}, {1.2, 0.9}};
  samples.compile = {{0.5, 0.6}, {0.55, 0.5}};
  samples.compile_status = "measured";
  samples.eager_clocks = {{2.1, 2.1}, {3.0, 3.2}};
  samples.calls_per_round = 2;
  samples.input_bytes = 4096;
  samples.output_bytes = 2048;
  samples.device_json = R"({"type":"cuda","l2_bytes":62914560})";
  const std::string json = baseline_json(samples);
  auto back = parse_baseline(json);
  REQUIRE_MESSAGE(back, back.status().message());
  CHECK(back.value().eager == samples.eager);
  CHECK(back.value().compile == samples.compile);
  CHECK(back.value().eager_clocks.host_ms == samples.eager_clocks.host_ms);
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
  std::string short_clocks = baseline_json(samples);
  short_clocks.replace(short_clocks.find("[3,3.2]"), 7, "[3]");
  CHECK_FALSE(parse_baseline(short_clocks));
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
