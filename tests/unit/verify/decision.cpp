// The verifier's judgement as a pure function: each rule and its precedence, without a process.
#include "cudaagent/verify/decision.h"

#include <doctest/doctest.h>

#include <csignal>

namespace cudaagent {
namespace {

CallResult matching_call() {
  CallResult call;
  call.check = CallCheck{true, "none", "", 0, 0, 0, "output"};
  return call;
}

// Facts of a candidate that did everything right: built, started, five matching checks, a clean end.
VerifyFacts passing() {
  VerifyFacts facts;
  facts.checks_wanted = 5;
  facts.built = facts.build_ok = true;
  facts.start = RunnerStart{true, "", std::nullopt, "{}", {}, 0.1};
  facts.batch = CallBatch{};
  for (int i = 0; i < 5; ++i) facts.batch->calls.push_back(matching_call());
  facts.end = RunnerEnd{};
  return facts;
}

TEST_CASE("a candidate whose every check matches passes") {
  const VerifyDecision decision = decide_verify(passing());
  CHECK(decision.verdict == Verdict::kPass);
  CHECK(decision.reason == "all 5 checks match the reference");
}

TEST_CASE("static policy findings win over everything that ran") {
  VerifyFacts facts = passing();
  facts.policy = PolicyVerdict{Verdict::kFlagHack, "dlsym in kernels/a.o"};
  facts.batch->calls[0].check->match = false;
  CHECK(decide_verify(facts).verdict == Verdict::kFlagHack);
}

TEST_CASE("a failed build is FAIL_COMPILE, or FAIL_RESOURCE when a limit stopped it") {
  VerifyFacts facts = passing();
  facts.build_ok = false;
  facts.build_reason = "kernels/a.cu:3: error";
  CHECK(decide_verify(facts).verdict == Verdict::kFailCompile);
  facts.build_resource = true;
  CHECK(decide_verify(facts).verdict == Verdict::kFailResource);
}

TEST_CASE("machinery failures are INFRA_ERROR, never the candidate's fault") {
  VerifyFacts facts = passing();
  facts.infra = "the task could not be loaded";
  CHECK(decide_verify(facts).verdict == Verdict::kInfraError);
  VerifyFacts unstarted = passing();
  unstarted.start.reset();
  CHECK(decide_verify(unstarted).verdict == Verdict::kInfraError);
}

TEST_CASE("a runner that never got ready: crash, limit or hang") {
  VerifyFacts facts = passing();
  facts.start->ok = false;
  ProcessResult ended;
  ended.outcome = ProcessResult::Outcome::kExited;
  ended.exit_code = 3;
  ended.err = "ImportError: no module named cuda_extension\n";
  facts.start->ended = ended;
  VerifyDecision decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kFailRuntime);
  CHECK(decision.reason.find("ImportError") != std::string::npos);
  ended.outcome = ProcessResult::Outcome::kSignaled;
  ended.signal = SIGKILL;
  facts.start->ended = ended;
  CHECK(decide_verify(facts).verdict == Verdict::kFailResource);
  facts.start->ended.reset();
  facts.start->problem = "the runner did not get ready within 600 s";
  CHECK(decide_verify(facts).verdict == Verdict::kFailTimeout);
}

TEST_CASE("a call that ended the batch: timeout, memory, exception, fault") {
  VerifyFacts facts = passing();
  facts.batch->stopped = CallStop{2, "timeout", "no answer within 60 s"};
  CHECK(decide_verify(facts).verdict == Verdict::kFailTimeout);
  facts.batch->stopped = CallStop{0, "runner error", "Traceback...\nMemoryError"};
  CHECK(decide_verify(facts).verdict == Verdict::kFailResource);
  facts.batch->stopped = CallStop{0, "runner error", "RuntimeError: CUDA error: an illegal memory access\nCompile with..."};
  VerifyDecision decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kFailRuntime);
  CHECK(decision.reason.find("inputs are read-only") != std::string::npos);
}

TEST_CASE("a process left behind is FLAG_HACK, before the audit and the checks") {
  VerifyFacts facts = passing();
  facts.end->process.stray_processes = 1;
  facts.end->forbidden_ops["add"] = 5;
  facts.batch->calls[0].check->match = false;
  CHECK(decide_verify(facts).verdict == Verdict::kFlagHack);
}

TEST_CASE("torch compute in forward is REJECT_POLICY, before a wrong answer") {
  VerifyFacts facts = passing();
  facts.end->forbidden_ops["relu"] = 5;
  facts.batch->calls[1].check->match = false;
  const VerifyDecision decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kRejectPolicy);
  CHECK(decision.reason.find("relu x5") != std::string::npos);
}

TEST_CASE("a wrong output is FAIL_INCORRECT; a foreign output type is REJECT_POLICY") {
  VerifyFacts facts = passing();
  facts.batch->calls[3].check->match = false;
  facts.batch->calls[3].check->failure = "values";
  facts.batch->calls[3].check->reason = "output: 7 of 100 elements outside";
  VerifyDecision decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kFailIncorrect);
  CHECK(decision.reason.rfind("check 3: ", 0) == 0);
  facts.batch->calls[3].check->failure = "type";
  CHECK(decide_verify(facts).verdict == Verdict::kRejectPolicy);
}

TEST_CASE("fewer checks than asked is not a pass") {
  VerifyFacts facts = passing();
  facts.batch->calls.pop_back();
  CHECK(decide_verify(facts).verdict == Verdict::kInfraError);
}

}  // namespace
}  // namespace cudaagent
