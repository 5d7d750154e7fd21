// The verifier's judgement as a pure function: each rule and its precedence, without a process.
#include "cudaagent/verify/decision.h"

#include <doctest/doctest.h>

#include <csignal>
#include <initializer_list>
#include <string>
#include <utility>

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
  facts.end->reported = true;
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

TEST_CASE("model_new.py's static policy: tampering first, then the snapshot's findings, then its own") {
  VerifyFacts facts = passing();
  facts.python_policy = PolicyVerdict{Verdict::kRejectPolicy, "python-import: model_new.py:2: os"};
  VerifyDecision decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kRejectPolicy);
  CHECK(decision.reason == "python-import: model_new.py:2: os");
  // The snapshot's finding is reported before model_new.py's.
  facts.policy = PolicyVerdict{Verdict::kRejectPolicy, "forbidden-file: kernels/x.so"};
  CHECK(decide_verify(facts).reason == "forbidden-file: kernels/x.so");
  // Tampering outranks any other static finding.
  facts.python_policy = PolicyVerdict{Verdict::kFlagHack, "python-frames: model_new.py:9: f_back"};
  decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kFlagHack);
  CHECK(decision.reason == "python-frames: model_new.py:9: f_back");
  // Among two tamperings, the snapshot's is reported.
  facts.policy->verdict = Verdict::kFlagHack;
  CHECK(decide_verify(facts).reason == "forbidden-file: kernels/x.so");
}

TEST_CASE("a model_new.py that does not compile is FAIL_COMPILE unless a static finding decides") {
  VerifyFacts facts = passing();
  facts.built = facts.build_ok = false;  // the build never ran
  facts.start.reset();
  facts.batch.reset();
  facts.end.reset();
  facts.python_policy = PolicyVerdict{Verdict::kFailCompile, "model_new.py does not compile: SyntaxError"};
  VerifyDecision decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kFailCompile);
  CHECK(decision.reason == "model_new.py does not compile: SyntaxError");
  facts.policy = PolicyVerdict{Verdict::kRejectPolicy, "forbidden-file: kernels/x.so"};
  CHECK(decide_verify(facts).verdict == Verdict::kRejectPolicy);
  // Its outcome decides before a failure of the machinery that came later.
  facts.policy.reset();
  facts.infra = "the task could not be loaded";
  CHECK(decide_verify(facts).verdict == Verdict::kFailCompile);
}

TEST_CASE("a failed build is FAIL_COMPILE, or FAIL_RESOURCE when a limit stopped it") {
  VerifyFacts facts = passing();
  facts.build_ok = false;
  facts.build_reason = "kernels/a.cu:3: error";
  CHECK(decide_verify(facts).verdict == Verdict::kFailCompile);
  facts.build_resource = true;
  CHECK(decide_verify(facts).verdict == Verdict::kFailResource);
}

// Facts of a candidate whose objects import `symbols` (one finding each, rule and verdict as the
// object policy gives them) and whose checks all passed.
VerifyFacts with_objects(std::initializer_list<std::pair<std::string, std::string>> rules) {
  VerifyFacts facts = passing();
  for (const auto& [rule, detail] : rules) {
    facts.object_findings.push_back({rule, "kernels/a.cpp", detail, Verdict::kPass});
  }
  return facts;
}

TEST_CASE("object findings of tampering are FLAG_HACK, whatever ran after") {
  // Each class of issue 10's native code that touches the machinery: dynamic lookup, raw system
  // calls, dispatch-key state, running Python code, writable code (and a lying nm).
  for (const char* rule : {"dynamic-lookup", "raw-syscall", "dispatch-state", "python-exec",
                           "code-memory", "process-access", "profiler-access", "malformed-object"}) {
    const VerifyDecision decision = decide_verify(with_objects({{rule, "dlsym"}}));
    CHECK_MESSAGE(decision.verdict == Verdict::kFlagHack, rule);
    CHECK(decision.reason == std::string(rule) + ": kernels/a.cpp: dlsym");
  }
}

TEST_CASE("object findings of forbidden work are REJECT_POLICY") {
  // The verdict comes from the rule, not from the finding's own verdict field (left kPass above).
  for (const char* rule : {"torch-compute", "thread-creation", "files-processes", "python-api",
                           "cublas-not-gemm", "cudnn-not-convolution", "cuda-api-not-allowed",
                           "symbol-not-allowed", "unreadable-object"}) {
    CHECK_MESSAGE(decide_verify(with_objects({{rule, "x"}})).verdict == Verdict::kRejectPolicy, rule);
  }
}

TEST_CASE("mixed object findings: FLAG_HACK wins and its finding is the reason") {
  const VerifyDecision decision =
      decide_verify(with_objects({{"torch-compute", "at::native::relu"}, {"thread-creation", "pthread_create"},
                                  {"dynamic-lookup", "dlsym"}}));
  CHECK(decision.verdict == Verdict::kFlagHack);
  CHECK(decision.reason == "dynamic-lookup: kernels/a.cpp: dlsym");
  const VerifyDecision rejected =
      decide_verify(with_objects({{"thread-creation", "pthread_create"}, {"torch-compute", "relu"}}));
  CHECK(rejected.verdict == Verdict::kRejectPolicy);
  CHECK(rejected.reason == "thread-creation: kernels/a.cpp: pthread_create");
}

TEST_CASE("object findings rank below source findings, above the machinery and the run") {
  VerifyFacts facts = with_objects({{"dynamic-lookup", "dlsym"}});
  facts.infra = "the task could not be loaded";
  facts.batch->calls[0].check->match = false;
  CHECK(decide_verify(facts).verdict == Verdict::kFlagHack);
  facts.policy = PolicyVerdict{Verdict::kRejectPolicy, "unexpected-file: x.so"};
  CHECK(decide_verify(facts).reason == "unexpected-file: x.so");
}

TEST_CASE("a build limit is FAIL_RESOURCE with the limit as the reason") {
  VerifyFacts facts = passing();
  facts.build_ok = false;
  facts.build_resource = true;
  facts.build_reason = "the build hit a limit: kernels/a.cpp: CPU time (--build-cpu 300 s)";
  const VerifyDecision decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kFailResource);
  CHECK(decision.reason == facts.build_reason);
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

TEST_CASE("a runner that ends without the audit's report earns no PASS; an audit switched off is FLAG_HACK") {
  VerifyFacts facts = passing();
  facts.end->reported = false;  // it exited, crashed or hung after its last answer
  VerifyDecision decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kFailRuntime);
  CHECK(decision.reason.find("without the operator audit's report") != std::string::npos);
  facts = passing();
  facts.end->audit_off = 2;  // its probe went unseen after two audited forwards
  decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kFlagHack);
  CHECK(decision.reason.find("switched off") != std::string::npos);
  CHECK(decision.reason.find("2 audited forwards") != std::string::npos);
  // Switched off outranks what the audit saw before it was.
  facts.end->forbidden_ops["add"] = 3;
  CHECK(decide_verify(facts).verdict == Verdict::kFlagHack);
}

TEST_CASE("a call that raised is the audit's REJECT_POLICY when the audit saw something; else FAIL_RUNTIME") {
  VerifyFacts facts = passing();
  facts.batch->stopped = CallStop{0, "runner error", "RuntimeError: the operator audit: ..."};
  facts.end->forbidden_ops["tensor values read one by one (over 16 per forward)"] = 1;
  VerifyDecision decision = decide_verify(facts);
  CHECK(decision.verdict == Verdict::kRejectPolicy);
  CHECK(decision.reason.find("read one by one (over 16 per forward) x1") != std::string::npos);
  facts.end->forbidden_ops.clear();
  CHECK(decide_verify(facts).verdict == Verdict::kFailRuntime);
  // A timeout stays a timeout: the audit stops a forward only by raising in it.
  facts.end->forbidden_ops["add"] = 1;
  facts.batch->stopped = CallStop{0, "timeout", "no answer within 60 s"};
  CHECK(decide_verify(facts).verdict == Verdict::kFailTimeout);
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
