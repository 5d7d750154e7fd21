// Tests for the compiler limits (issue 10, class 4): how a finished compiler command is judged
// (a limit reached is FAIL_RESOURCE with the limit named, anything else FAIL_COMPILE), the build
// budget, and the limits each command gets. The end-to-end cases (an #include of /dev/zero, a CPU
// burn, a huge object) are catalog cases in tests/verify/cases/8x-*.
#include "cudaagent/candidate/build_limits.h"

#include <doctest/doctest.h>

#include <csignal>

using cudaagent::BuildBudget;
using cudaagent::BuildLimits;
using cudaagent::judge_compiler_run;
using cudaagent::ProcessResult;
using cudaagent::StepFailure;

namespace {

ProcessResult exited(int code, std::string err = {}) {
  ProcessResult r;
  r.outcome = ProcessResult::Outcome::kExited;
  r.exit_code = code;
  r.err = std::move(err);
  return r;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a clean exit is no failure, an ordinary error is a compile failure") {
  const BuildLimits limits;
  CHECK(judge_compiler_run(exited(0), limits, 300, 300).failure == StepFailure::kNone);
  const auto error = judge_compiler_run(
      exited(1, "/w/kernels/a.cpp:1:1: error: 'x' was not declared\n"), limits, 300, 300);
  CHECK(error.failure == StepFailure::kCompile);
}

TEST_CASE("memory: cc1plus's own words on a line that begins with its name") {
  BuildLimits limits;
  limits.memory_bytes = std::uint64_t{6} << 30;
  const auto r = judge_compiler_run(
      exited(1, "cc1plus: out of memory allocating 8589934608 bytes after a total of 610304 bytes\n"),
      limits, 300, 300);
  CHECK(r.failure == StepFailure::kResource);
  CHECK(has(r.reason, "memory limit (6144 MiB)"));
  // The same words inside a diagnostic (the candidate's #error text) do not count.
  const auto forged = judge_compiler_run(
      exited(1, "/w/kernels/a.cpp:1:2: error: #error cc1plus: out of memory\n"), limits, 300, 300);
  CHECK(forged.failure == StepFailure::kCompile);
}

TEST_CASE("signals: CPU, file size, killed; directly or as bwrap's 128+N") {
  const BuildLimits limits;
  ProcessResult xcpu;
  xcpu.outcome = ProcessResult::Outcome::kSignaled;
  xcpu.signal = SIGXCPU;
  // 42 s is below the per-process 300 s: the build's budget lowered it, and the reason says so.
  CHECK(has(judge_compiler_run(xcpu, limits, 42, 300).reason,
            "CPU-time limit (42 s, what the build's CPU budget had left)"));
  CHECK(has(judge_compiler_run(xcpu, limits, limits.cpu_seconds, 300).reason, "CPU-time limit (300 s)"));
  CHECK(has(judge_compiler_run(exited(128 + SIGXFSZ), limits, 300, 300).reason, "file-size limit"));
  ProcessResult killed = exited(128 + SIGKILL);
  killed.user_cpu_seconds = 41.5;
  CHECK(has(judge_compiler_run(killed, limits, 42, 300).reason, "CPU-time limit"));
  killed.user_cpu_seconds = 1;
  CHECK(has(judge_compiler_run(killed, limits, 42, 300).reason, "was killed"));
  CHECK(judge_compiler_run(exited(255), limits, 300, 300).failure == StepFailure::kCompile);
}

TEST_CASE("drivers report their children: g++ and nvcc") {
  const BuildLimits limits;
  CHECK(judge_compiler_run(exited(1, "g++: fatal error: Killed signal terminated program cc1plus\n"
                                     "compilation terminated.\n"),
                           limits, 300, 300)
            .failure == StepFailure::kResource);
  CHECK(judge_compiler_run(
            exited(1, "g++: internal compiler error: File size limit exceeded signal terminated "
                      "program as\n"),
            limits, 300, 300)
            .reason.find("file-size limit") != std::string::npos);
  CHECK(judge_compiler_run(exited(1, "nvcc error   : 'cicc' died due to signal 9 (Kill signal)\n"),
                           limits, 300, 300)
            .failure == StepFailure::kResource);
}

TEST_CASE("a command stopped at its deadline is a wall-clock limit") {
  ProcessResult r;
  r.outcome = ProcessResult::Outcome::kTimedOut;
  const auto judged = judge_compiler_run(r, BuildLimits{}, 300, 12);
  CHECK(judged.failure == StepFailure::kResource);
  CHECK(has(judged.reason, "wall-clock limit (12 s)"));
}

TEST_CASE("the build budget lowers each command's limits and then runs out") {
  BuildLimits limits;
  limits.process_seconds = 300;
  limits.cpu_seconds = 300;
  limits.build_seconds = 100;
  limits.build_cpu_seconds = 50;
  BuildBudget budget(limits);
  auto first = budget.allowance(0);
  CHECK_FALSE(first.exhausted);
  CHECK(first.timeout == doctest::Approx(100));
  CHECK(first.cpu_seconds == 50);
  budget.charge(45.5);
  auto second = budget.allowance(60);
  CHECK(second.timeout == doctest::Approx(40));
  CHECK(second.cpu_seconds == 5);
  budget.charge(5);
  CHECK(budget.allowance(61).exhausted);
  CHECK(has(budget.allowance(61).reason, "CPU budget"));
  BuildBudget fresh(limits);
  CHECK(has(fresh.allowance(100).reason, "wall-clock budget"));
}

TEST_CASE("every compiler command gets all four limits") {
  BuildLimits limits;
  const auto candidate = cudaagent::compiler_process_limits(limits, 7, false);
  CHECK(candidate.address_space_bytes == limits.memory_bytes);
  CHECK(candidate.cpu_seconds == 7);
  CHECK(candidate.file_size_bytes == limits.file_size_bytes);
  CHECK(candidate.open_files == limits.open_files);
  CHECK(cudaagent::compiler_process_limits(limits, 7, true).file_size_bytes ==
        limits.header_file_size_bytes);
}
