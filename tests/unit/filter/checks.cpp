// The filter's rules without Python: report validation (the job's findings about its outputs
// included), how a process ended, what the findings decide, timing statistics and the window.
#include "cudaagent/filter/checks.h"

#include <doctest/doctest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>

using cudaagent::FilterReason;
using cudaagent::HarnessReport;
using cudaagent::ProcessResult;
using cudaagent::RunJudgement;
using Outcome = cudaagent::ProcessResult::Outcome;
using End = cudaagent::RunJudgement::End;

namespace {

std::string report_json(const std::string& overrides = "") {
  std::string json = R"({"mode": "check", "phase": "forward", "done": true, "error": null,
    "torch": "1.13.0a0", "has_compile": false, "inputs_equal": false, "compile": null,
    "outputs": null, "warmup_calls": 0, "warmup_max_ms": 0.0,
    "samples_ms": [], "compile_samples_ms": [])";
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
           {"\"torch\": \"1.13.0a0\", ", ""},
           {"\"outputs\": null, ", ""},
           {"\"outputs\": null", "\"outputs\": []"},
           {"\"outputs\": null", R"("outputs": {"determinism": "maybe", "findings": [], "compile_differs": null})"},
           {"\"outputs\": null", R"("outputs": {"determinism": "no", "findings": [{"check": "kept", "detail": ""}], "compile_differs": null})"},
           {"\"outputs\": null", R"("outputs": {"determinism": "no", "findings": [{"check": "constant"}], "compile_differs": null})"},
           {"\"outputs\": null", R"("outputs": {"determinism": "", "findings": [], "compile_differs": true})"},
           {"\"outputs\": null", R"("outputs": {"determinism": "", "findings": []})"}}) {
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
  const auto with = [&](const std::string& fields) {
    return cudaagent::parse_harness_report(replaced(good, "\"done\": true", "\"done\": true, " + fields));
  };
  auto parsed = with(R"("phase_seconds": {"load": 0.5, "compile": 8.25, "judge": 3}, "peak_bytes": 3000000000)");
  REQUIRE(parsed.is_ok());
  using Phases = std::vector<std::pair<std::string, double>>;
  CHECK(parsed.value().phase_seconds == Phases{{"load", 0.5}, {"compile", 8.25}, {"judge", 3.0}});
  CHECK(parsed.value().peak_bytes == 3000000000ULL);
  for (const char* bad : {R"("phase_seconds": [])", R"("phase_seconds": {"elsewhere": 1})",
                          R"("phase_seconds": {"load": -1})", R"("phase_seconds": {"load": "1"})",
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

TEST_CASE("parse_harness_report reads the job's findings about its outputs, bounded") {
  auto parsed = cudaagent::parse_harness_report(replaced(
      report_json(), "\"outputs\": null",
      R"("outputs": {"determinism": "no", "findings": [{"check": "determinism", "detail": "two runs differ"},)"
      R"( {"check": "all_zero", "detail": "output float32[3] is all zeros"}], "compile_differs": ""})"));
  REQUIRE(parsed.is_ok());
  REQUIRE(parsed.value().outputs);
  const HarnessReport::Outputs& outputs = *parsed.value().outputs;
  CHECK(outputs.determinism == "no");
  CHECK(outputs.findings == std::vector<FilterReason>{{"determinism", "two runs differ"},
                                                      {"all_zero", "output float32[3] is all zeros"}});
  CHECK(outputs.compile_differs == std::optional<std::string>(""));
  CHECK_FALSE(cudaagent::parse_harness_report(report_json()).value().outputs);

  std::string many = R"("outputs": {"determinism": "", "compile_differs": null, "findings": [)";
  for (int i = 0; i < 17; ++i) many += std::string(i ? ", " : "") + R"({"check": "output", "detail": "x"})";
  CHECK_FALSE(cudaagent::parse_harness_report(replaced(report_json(), "\"outputs\": null", many + "]}")).is_ok());
  auto long_detail = cudaagent::parse_harness_report(replaced(
      report_json(), "\"outputs\": null",
      R"("outputs": {"determinism": "", "compile_differs": null, "findings": [{"check": "output", "detail": ")" +
          std::string(5000, 'y') + "\"}]}"));
  REQUIRE(long_detail.is_ok());
  CHECK(long_detail.value().outputs->findings[0].detail.size() < 2100);
}

namespace {

HarnessReport with_outputs(std::vector<FilterReason> findings, std::optional<std::string> differs) {
  HarnessReport report = report_in("checked");
  report.torch = "2.11.0";
  report.has_compile = true;
  report.compile = HarnessReport::Compile{true, "", 7.5};
  report.outputs = HarnessReport::Outputs{"bitwise", std::move(findings), std::move(differs)};
  return report;
}

struct Decided {
  std::vector<FilterReason> reasons;
  std::string determinism, compile_text;
};

Decided decide(const HarnessReport& report, bool judge_compile = true) {
  Decided d;
  d.compile_text = "not run: the task failed before torch.compile";
  cudaagent::judge_reported_outputs(report, judge_compile, d.reasons, d.determinism, d.compile_text);
  return d;
}

}  // namespace

TEST_CASE("judge_reported_outputs: the findings decide, then torch.compile's comparison") {
  Decided d = decide(with_outputs({}, ""));
  CHECK(d.reasons.empty());
  CHECK(d.determinism == "bitwise");
  CHECK(d.compile_text == "ok");

  d = decide(with_outputs({}, "torch.compile's output differs from eager beyond atol=0.01, rtol=0.01: x"));
  CHECK(checks_of(d.reasons) == std::vector<std::string>{"compile"});
  CHECK(d.compile_text.rfind("failed: torch.compile's output differs", 0) == 0);

  // torch.compile ran but its output was never compared: not a pass.
  d = decide(with_outputs({}, std::nullopt));
  CHECK(checks_of(d.reasons) == std::vector<std::string>{"compile"});

  HarnessReport failed = with_outputs({}, std::nullopt);
  failed.compile = HarnessReport::Compile{false, "BackendCompilerFailed: boom", 3};
  d = decide(failed);
  CHECK(d.reasons == std::vector<FilterReason>{{"compile", "BackendCompilerFailed: boom"}});

  // Eager's findings: compile was not run and is not blamed.
  HarnessReport eager_failed = with_outputs({{"input_dependence", "match"}}, std::nullopt);
  eager_failed.compile.reset();
  d = decide(eager_failed);
  CHECK(checks_of(d.reasons) == std::vector<std::string>{"input_dependence"});
  CHECK(d.compile_text == "not run: the task failed before torch.compile");

  // No findings at all: the job never judged its outputs.
  HarnessReport none = with_outputs({}, "");
  none.outputs.reset();
  CHECK(checks_of(decide(none).reasons) == std::vector<std::string>{"output"});

  // torch 1.x: no compile to judge.
  HarnessReport old = with_outputs({}, std::nullopt);
  old.has_compile = false;
  old.compile.reset();
  d = decide(old);
  CHECK(d.reasons.empty());
  CHECK(d.compile_text == "skipped: torch 2.11.0 has no torch.compile");
  // Not asked to judge compile (--no-compile, or a crash in it): the findings alone.
  CHECK(decide(with_outputs({}, std::nullopt), false).reasons.empty());
}

TEST_CASE("judge_run: a failure while judging is the output's") {
  const RunJudgement j = cudaagent::judge_run(exited(3), failed_in("judge", "RuntimeError: odd"), "");
  CHECK(checks_of(j.reasons) == std::vector<std::string>{"output"});
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
