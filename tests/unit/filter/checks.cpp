// The filter's rules without Python: report validation, how a process ended, the output checks,
// timing statistics and the window.
#include "cudaagent/filter/checks.h"

#include <doctest/doctest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>

using cudaagent::DType;
using cudaagent::FilterReason;
using cudaagent::HarnessReport;
using cudaagent::ProcessResult;
using cudaagent::RunJudgement;
using cudaagent::TensorTree;
using Outcome = cudaagent::ProcessResult::Outcome;
using End = cudaagent::RunJudgement::End;

namespace {

TensorTree floats(std::vector<float> values, std::vector<std::int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return TensorTree::tensor(DType::kFloat32, std::move(shape), std::move(bytes));
}

TensorTree ints(std::vector<std::int64_t> values) {
  std::vector<std::byte> bytes(values.size() * sizeof(std::int64_t));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return TensorTree::tensor(DType::kInt64, {static_cast<std::int64_t>(values.size())}, std::move(bytes));
}

std::string report_json(const std::string& overrides = "") {
  std::string json = R"({"mode": "check", "phase": "forward", "done": true, "error": null,
    "torch": "1.13.0a0", "has_compile": false, "inputs_equal": false, "compile": null,
    "warmup_calls": 0, "warmup_max_ms": 0.0, "samples_ms": [], "compile_samples_ms": [])";
  return overrides.empty() ? json + "}" : json + ", " + overrides + "}";
}

// Variants of the one good report are made by replacing a piece of its text.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

ProcessResult exited(int code) {
  ProcessResult result;
  result.outcome = Outcome::kExited;
  result.exit_code = code;
  return result;
}

ProcessResult signaled(int signal_number) {
  ProcessResult result;
  result.outcome = Outcome::kSignaled;
  result.signal = signal_number;
  return result;
}

HarnessReport report_in(const std::string& phase, bool done = false) {
  HarnessReport report;
  report.mode = "check";
  report.phase = phase;
  report.done = done;
  return report;
}

HarnessReport failed_in(const std::string& phase, const std::string& message) {
  HarnessReport report = report_in(phase);
  report.error = HarnessReport::Error{phase, "RuntimeError", message};
  return report;
}

std::vector<std::string> checks_of(const std::vector<FilterReason>& reasons) {
  std::vector<std::string> checks;
  for (const auto& reason : reasons) checks.push_back(reason.check);
  return checks;
}

}  // namespace

TEST_CASE("parse_harness_report reads a complete report") {
  auto parsed = cudaagent::parse_harness_report(
      replaced(replaced(report_json(), "\"compile\": null",
                        R"("compile": {"ok": false, "error": "BackendCompilerFailed: x", "seconds": 1.5})"),
               "\"samples_ms\": []", "\"samples_ms\": [1.5, 2, 0]"));
  REQUIRE(parsed.is_ok());
  const HarnessReport& report = parsed.value();
  CHECK(report.mode == "check");
  CHECK(report.phase == "forward");
  CHECK(report.done);
  CHECK_FALSE(report.error);
  CHECK(report.torch == "1.13.0a0");
  CHECK(report.inputs_equal == std::optional<bool>(false));
  REQUIRE(report.compile);
  CHECK_FALSE(report.compile->ok);
  CHECK(report.compile->error == "BackendCompilerFailed: x");
  CHECK(report.samples_ms == std::vector<double>{1.5, 2.0, 0.0});
  CHECK(report.compile_samples_ms.empty());
}

TEST_CASE("parse_harness_report reads the compiled model's times and the phases after the checks") {
  auto parsed = cudaagent::parse_harness_report(
      replaced(replaced(report_json(), "\"compile_samples_ms\": []", "\"compile_samples_ms\": [0.5, 0.25]"),
               "\"phase\": \"forward\"", "\"phase\": \"compile_timing\""));
  REQUIRE(parsed.is_ok());
  CHECK(parsed.value().compile_samples_ms == std::vector<double>{0.5, 0.25});
  for (const char* phase : {"checked", "compile_warmup", "compile_timing"}) {
    CAPTURE(phase);
    CHECK(cudaagent::parse_harness_report(
              replaced(report_json(), "\"phase\": \"forward\"", std::string("\"phase\": \"") + phase + "\""))
              .is_ok());
  }
}

TEST_CASE("parse_harness_report refuses what the harness never writes") {
  const std::string good = report_json();
  REQUIRE(cudaagent::parse_harness_report(good).is_ok());
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"phase\": \"forward\"", "\"phase\": \"elsewhere\""},
           {"\"mode\": \"check\"", "\"mode\": \"other\""},
           {"\"done\": true", "\"done\": 1"},
           {"\"error\": null", "\"error\": \"boom\""},
           {"\"error\": null", R"("error": {"phase": "nowhere", "type": "X", "message": "m"})"},
           {"\"inputs_equal\": false", "\"inputs_equal\": \"no\""},
           {"\"compile\": null", "\"compile\": {\"ok\": true}"},
           {"\"samples_ms\": []", "\"samples_ms\": [-1]"},
           {"\"samples_ms\": []", "\"samples_ms\": [\"1\"]"},
           {"\"samples_ms\": []", "\"samples_ms\": {}"},
           {"\"compile_samples_ms\": []", "\"compile_samples_ms\": [-1]"},
           {", \"compile_samples_ms\": []", ""},
           {"\"mode\": \"check\"", "\"mode\": \"time\""},
           {"\"warmup_calls\": 0", "\"warmup_calls\": 0.5"},
           {"\"torch\": \"1.13.0a0\", ", ""}}) {
    CAPTURE(to);
    CHECK_FALSE(cudaagent::parse_harness_report(replaced(good, from, to)).is_ok());
  }
  CHECK_FALSE(cudaagent::parse_harness_report("[]").is_ok());
  CHECK_FALSE(cudaagent::parse_harness_report("{\"mode\":").is_ok());
  std::string many = "[";
  for (int i = 0; i < 1001; ++i) many += (i ? ",1" : "1");
  CHECK_FALSE(cudaagent::parse_harness_report(replaced(good, "\"samples_ms\": []",
                                                       "\"samples_ms\": " + many + "]"))
                  .is_ok());
}

TEST_CASE("parse_harness_report reads where the job's seconds went, and refuses anything else there") {
  const std::string good = report_json();
  auto without = cudaagent::parse_harness_report(good);  // an older harness wrote neither
  REQUIRE(without.is_ok());
  CHECK(without.value().phase_seconds.empty());
  CHECK(without.value().write_seconds == 0.0);
  const auto with = [&](const std::string& fields) {
    return cudaagent::parse_harness_report(replaced(good, "\"done\": true", "\"done\": true, " + fields));
  };
  auto parsed = with(R"("phase_seconds": {"load": 0.5, "compile": 8.25, "checked": 3}, "write_seconds": 1.5, )"
                     R"("peak_bytes": 3000000000)");
  REQUIRE(parsed.is_ok());
  using Phases = std::vector<std::pair<std::string, double>>;
  CHECK(parsed.value().phase_seconds == Phases{{"load", 0.5}, {"compile", 8.25}, {"checked", 3.0}});
  CHECK(parsed.value().write_seconds == 1.5);
  CHECK(parsed.value().peak_bytes == 3000000000ULL);
  for (const char* bad : {R"("phase_seconds": [])", R"("phase_seconds": {"elsewhere": 1})",
                          R"("phase_seconds": {"load": -1})", R"("phase_seconds": {"load": "1"})",
                          R"("write_seconds": -0.5)", R"("write_seconds": null)",
                          R"("peak_bytes": -1)", R"("peak_bytes": 1.5)"}) {
    CAPTURE(bad);
    CHECK_FALSE(with(bad).is_ok());
  }
  std::string repeated = R"("phase_seconds": {)";
  for (int i = 0; i < 40; ++i) repeated += (i ? R"(, "load": 1)" : R"("load": 1)");
  CHECK_FALSE(with(repeated + "}").is_ok());
}

TEST_CASE("parse_harness_report cuts long messages") {
  const std::string message(5000, 'x');
  auto parsed = cudaagent::parse_harness_report(replaced(
      report_json(), "\"error\": null",
      R"("error": {"phase": "load", "type": "SyntaxError", "message": ")" + message + "\"}"));
  REQUIRE(parsed.is_ok());
  REQUIRE(parsed.value().error);
  CHECK(parsed.value().error->message.size() == 2003);
  CHECK(parsed.value().error->phase == "load");
}

TEST_CASE("judge_run: a complete report with exit 0 is completed") {
  const RunJudgement j = cudaagent::judge_run(exited(0), report_in("forward", true), "");
  CHECK(j.end == End::kCompleted);
  CHECK(j.reasons.empty());
}

TEST_CASE("judge_run: task errors are reasons named after their phase") {
  for (auto [phase, check] : std::vector<std::pair<std::string, std::string>>{
           {"load", "load"}, {"interface", "interface"}, {"init", "init"}, {"inputs", "inputs"},
           {"forward", "eager"}, {"warmup", "eager"}, {"timing", "eager"}, {"compile", "compile"},
           {"compile_warmup", "compile"}, {"compile_timing", "compile"}}) {
    CAPTURE(phase);
    const RunJudgement j = cudaagent::judge_run(exited(3), failed_in(phase, "ValueError: bad"), "");
    CHECK(j.end == End::kRejected);
    CHECK(j.reasons == std::vector<FilterReason>{{check, "ValueError: bad"}});
    CHECK(j.phase == phase);
  }
}

TEST_CASE("judge_run: allocation failures are memory, in any phase") {
  for (const char* message :
       {"RuntimeError: [enforce fail at alloc_cpu.cpp:75] DefaultCPUAllocator: can't allocate memory",
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 80.00 GiB", "MemoryError: "}) {
    const RunJudgement j = cudaagent::judge_run(exited(3), failed_in("init", message), "");
    CHECK(checks_of(j.reasons) == std::vector<std::string>{"memory"});
    CHECK(j.reasons[0].detail == std::string("init: ") + message);
  }
}

TEST_CASE("judge_run: a full disk is disk, and memory and disk are the shared resources") {
  const RunJudgement j = cudaagent::judge_run(
      exited(3), failed_in("forward", "OSError: [Errno 28] No space left on device"), "");
  CHECK(checks_of(j.reasons) == std::vector<std::string>{"disk"});
  CHECK(cudaagent::failed_for_shared_resources(j.reasons));
  CHECK(cudaagent::failed_for_shared_resources({{"determinism", "x"}, {"memory", "y"}}));
  CHECK_FALSE(cudaagent::failed_for_shared_resources({{"eager", "OSError: [Errno 2] No such file"}}));
  CHECK_FALSE(cudaagent::failed_for_shared_resources({}));
}

TEST_CASE("judge_run: timeouts, signals and early exits") {
  ProcessResult timed_out = signaled(SIGKILL);
  timed_out.outcome = Outcome::kTimedOut;
  timed_out.timeout_seconds = 5;
  RunJudgement j = cudaagent::judge_run(timed_out, report_in("forward"), "");
  CHECK(j.reasons == std::vector<FilterReason>{{"timeout", "timed out after 5.0 s in forward"}});

  j = cudaagent::judge_run(signaled(SIGSEGV), report_in("init"), "");
  CHECK(checks_of(j.reasons) == std::vector<std::string>{"crash"});
  CHECK(j.reasons[0].detail.find("SIGSEGV") != std::string::npos);
  CHECK(j.reasons[0].detail.find("in init") != std::string::npos);

  j = cudaagent::judge_run(signaled(SIGKILL), report_in("forward"), "");
  CHECK(checks_of(j.reasons) == std::vector<std::string>{"memory"});

  ProcessResult early = exited(0);
  early.err = "some noise\nlast words\n";
  j = cudaagent::judge_run(early, report_in("forward"), "");
  CHECK(j.reasons == std::vector<FilterReason>{
                         {"crash", "exited with code 0 in forward before the harness finished: last words"}});
  // A report that says done does not hide a bad exit.
  j = cudaagent::judge_run(exited(1), report_in("forward", true), "");
  CHECK(checks_of(j.reasons) == std::vector<std::string>{"crash"});
}

TEST_CASE("judge_run: the machinery's failures are infrastructure, not the task's") {
  ProcessResult spawn;
  spawn.outcome = Outcome::kSpawnFailed;
  spawn.spawn_error = "cannot execute 'python': No such file or directory";
  CHECK(cudaagent::judge_run(spawn, std::nullopt, "").end == End::kInfra);

  ProcessResult bwrap = exited(1);
  bwrap.err = "bwrap: Can't find source path /nowhere: No such file or directory\n";
  RunJudgement j = cudaagent::judge_run(bwrap, std::nullopt, "'report.json': No such file or directory");
  CHECK(j.end == End::kInfra);
  CHECK(j.infra_reason.find("bwrap: Can't find source path") != std::string::npos);

  HarnessReport torch_failed = failed_in("torch", "ModuleNotFoundError: No module named 'torch'");
  j = cudaagent::judge_run(exited(4), torch_failed, "");
  CHECK(j.end == End::kInfra);
  CHECK(j.infra_reason.find("could not import torch") != std::string::npos);
  CHECK(cudaagent::judge_run(signaled(SIGSEGV), report_in("torch"), "").end == End::kInfra);
}

TEST_CASE("judge_outputs: a healthy task passes, bitwise deterministic") {
  const TensorTree a = floats({1, 2, 3, 4}), b = floats({5, 6, 7, 8});
  const auto j = cudaagent::judge_outputs(a, a, b, false, {});
  CHECK(j.reasons.empty());
  CHECK(j.determinism == "bitwise");
}

TEST_CASE("judge_outputs: determinism within tolerance, and beyond it") {
  const TensorTree a1 = floats({1, 2, 3, 4}), b = floats({5, 6, 7, 8});
  auto j = cudaagent::judge_outputs(a1, floats({1, 2, 3, 4.001f}), b, false, {});
  CHECK(j.reasons.empty());
  CHECK(j.determinism == "within tolerance");
  j = cudaagent::judge_outputs(a1, floats({1, 2, 3, 4.5f}), b, false, {});
  CHECK(checks_of(j.reasons) == std::vector<std::string>{"determinism"});
  CHECK(j.determinism == "no");
  CHECK(j.reasons[0].detail ==
        "two runs on the same inputs differ beyond atol=0.01, rtol=0.01: output: 1 of 4 elements "
        "differ; first at (3): got 4.5, expected 4 (|diff| 0.5 > tolerance 0.05)");
  // A different shape between runs is a difference too.
  j = cudaagent::judge_outputs(a1, floats({1, 2, 3}), b, false, {});
  CHECK(checks_of(j.reasons) == std::vector<std::string>{"determinism"});
}

TEST_CASE("judge_outputs: outputs that do not follow the inputs") {
  const TensorTree a = floats({1, 2, 3, 4});
  auto j = cudaagent::judge_outputs(a, a, floats({1, 2, 3, 4.001f}), false, {});
  CHECK(checks_of(j.reasons) == std::vector<std::string>{"input_dependence"});
  CHECK(j.reasons[0].detail.find("same inputs") == std::string::npos);
  j = cudaagent::judge_outputs(a, a, a, true, {});
  CHECK(j.reasons[0].detail.find("get_inputs returned the same inputs for both seeds") !=
        std::string::npos);
  // A tighter tolerance tells them apart.
  cudaagent::CompareOptions tight;
  tight.atol = tight.rtol = 1e-6;
  CHECK(cudaagent::judge_outputs(a, a, floats({1, 2, 3, 4.001f}), false, tight).reasons.empty());
}

TEST_CASE("judge_outputs: all-zero, constant and non-finite outputs") {
  const TensorTree b = floats({5, 6, 7, 8});
  auto j = cudaagent::judge_outputs(floats({0, -0.0f, 0, 0}, {2, 2}), floats({0, 0, 0, 0}, {2, 2}),
                                    floats({0, 1, 0, 0}, {2, 2}), false, {});
  REQUIRE(checks_of(j.reasons) == std::vector<std::string>{"all_zero"});
  CHECK(j.reasons[0].detail == "output float32[2, 2] is all zeros");

  const TensorTree c = floats({2.5f, 2.5f, 2.5f});
  j = cudaagent::judge_outputs(c, c, floats({1, 2, 3}), false, {});
  CHECK(j.reasons == std::vector<FilterReason>{{"constant", "output float32[3] is constant (every element 2.5)"}});

  // One element is not "constant"; a zero one is still all zeros.
  CHECK(cudaagent::judge_outputs(floats({7}), floats({7}), floats({8}), false, {}).reasons.empty());
  CHECK(checks_of(cudaagent::judge_outputs(floats({0}), floats({0}), floats({8}), false, {}).reasons) ==
        std::vector<std::string>{"all_zero"});

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const TensorTree bad = floats({1, nan, inf, nan});
  j = cudaagent::judge_outputs(bad, bad, b, false, {});
  REQUIRE(checks_of(j.reasons) == std::vector<std::string>{"non_finite"});
  CHECK(j.reasons[0].detail == "output float32[4] has 2 NaN and 1 infinite values of 4");

  // Integers: a constant argmax-like output.
  const TensorTree i = ints({3, 3, 3});
  CHECK(checks_of(cudaagent::judge_outputs(i, i, ints({1, 2, 3}), false, {}).reasons) ==
        std::vector<std::string>{"constant"});
}

TEST_CASE("judge_outputs: the second draw is scanned too and named") {
  const TensorTree a = floats({1, 2, 3});
  const auto j = cudaagent::judge_outputs(a, a, floats({0, 0, 0}), false, {});
  CHECK(j.reasons == std::vector<FilterReason>{
                         {"all_zero", "output float32[3] is all zeros (second input draw)"}});
}

TEST_CASE("judge_outputs: containers are walked; values that are not tensors are refused") {
  const TensorTree good = TensorTree::tuple({floats({1, 2}), floats({3, 4})});
  const TensorTree zero_second = TensorTree::tuple({floats({1, 2}), floats({0, 0})});
  auto j = cudaagent::judge_outputs(zero_second, zero_second, good, false, {});
  CHECK(j.reasons == std::vector<FilterReason>{{"all_zero", "output[1] float32[2] is all zeros"}});

  const TensorTree dict = TensorTree::dict({{"logits", floats({1, 1})}});
  j = cudaagent::judge_outputs(dict, dict, TensorTree::dict({{"logits", floats({2, 3})}}), false, {});
  CHECK(j.reasons == std::vector<FilterReason>{
                         {"constant", "output[\"logits\"] float32[2] is constant (every element 1)"}});

  const TensorTree odd = TensorTree::tuple({floats({1, 2}), TensorTree::other("builtins.str")});
  j = cudaagent::judge_outputs(odd, odd, odd, false, {});
  CHECK(j.reasons == std::vector<FilterReason>{{"output", "output[1] is a \"builtins.str\", not a tensor"}});
  CHECK(j.determinism.empty());

  const TensorTree number = TensorTree::integer(3);
  j = cudaagent::judge_outputs(number, number, number, false, {});
  CHECK(checks_of(j.reasons) == std::vector<std::string>{"output", "output"});
  CHECK(j.reasons[1].detail == "the output holds no tensor");
}

TEST_CASE("compare_compiled") {
  CHECK(cudaagent::compare_compiled(floats({1, 2}), floats({1, 2.001f}), {}).empty());
  const std::string differs = cudaagent::compare_compiled(floats({1, 2}), floats({1, 3}), {});
  CHECK(differs.find("torch.compile's output differs from eager") == 0);
  // Constant compiled output of a constant eager output is still a match (the degenerate rule
  // is judge_outputs' business).
  CHECK(cudaagent::compare_compiled(floats({1, 1}), floats({1, 1}), {}).empty());
}

TEST_CASE("eager_stats and the window") {
  CHECK_FALSE(cudaagent::eager_stats({}).is_ok());
  auto stats = cudaagent::eager_stats({4, 1, 3, 2});
  REQUIRE(stats.is_ok());
  CHECK(stats.value().median_ms == 2.5);
  CHECK(stats.value().min_ms == 1);
  CHECK(stats.value().max_ms == 4);
  CHECK(stats.value().mean_ms == 2.5);
  CHECK(stats.value().runs == 4);
  stats = cudaagent::eager_stats({9, 1, 5});
  CHECK(stats.value().median_ms == 5);

  CHECK_FALSE(cudaagent::judge_window(stats.value(), 1, 100));
  CHECK_FALSE(cudaagent::judge_window(stats.value(), 5, 5));  // the window is inclusive
  auto outside = cudaagent::judge_window(stats.value(), 10, 100);
  REQUIRE(outside);
  CHECK(*outside == FilterReason{"eager_time", "median 5 ms is below the window [10, 100] ms"});
  outside = cudaagent::judge_window(stats.value(), 0.5, 1);
  REQUIRE(outside);
  CHECK(outside->detail == "median 5 ms is above the window [0.5, 1] ms");
  CHECK(cudaagent::format_ms(0.0312345) == "0.0312 ms");
  CHECK(cudaagent::format_ms(1234.6) == "1235 ms");
}

TEST_CASE("compile_unavailable reads the torch version") {
  CHECK(cudaagent::compile_unavailable("1.13.0a0") ==
        std::optional<std::string>("skipped: torch 1.13 has no torch.compile"));
  CHECK(cudaagent::compile_unavailable("1.8.1+cu111") ==
        std::optional<std::string>("skipped: torch 1.8 has no torch.compile"));
  CHECK_FALSE(cudaagent::compile_unavailable("2.0.0"));
  CHECK_FALSE(cudaagent::compile_unavailable("2.11.0+cu130"));
  CHECK_FALSE(cudaagent::compile_unavailable("nightly"));
}
