// The verifier's verdict from its facts (decision.h has the order of precedence).
#include "cudaagent/verify/decision.h"

#include "cudaagent/candidate/static_policy.h"
#include "cudaagent/evaluation/call_verdicts.h"

namespace cudaagent {

VerifyDecision decide_verify(const VerifyFacts& facts) {
  // Tampering is the strongest finding of either static policy; FAIL_COMPILE the weakest (a
  // candidate whose model_new.py does not even parse, and nothing else was found).
  if (auto found = decide_static_policy(facts.policy, facts.python_policy)) return {found->verdict, found->reason};
  if (facts.built && !facts.build_ok) {
    return {facts.build_resource ? Verdict::kFailResource : Verdict::kFailCompile, facts.build_reason};
  }
  if (auto found = object_policy_verdict(facts.object_findings)) return {found->verdict, found->reason};
  if (facts.infra) return {Verdict::kInfraError, *facts.infra};
  if (!facts.start) return {Verdict::kInfraError, "the candidate was never started"};
  if (!facts.start->ok) {
    if (facts.start->ended) {
      const CallVerdict v = verdict_of_process(*facts.start->ended, "failed before its first call");
      return {v.verdict, v.reason};
    }
    if (facts.start->problem.find("did not get ready") != std::string::npos) {
      return {Verdict::kFailTimeout, facts.start->problem};
    }
    return {Verdict::kFailRuntime, facts.start->problem};
  }
  if (facts.batch && facts.batch->stopped) {
    if (facts.end && stopped_by_audit(*facts.batch->stopped, *facts.end)) {
      const CallVerdict v = *verdict_of_audit(*facts.end);
      return {v.verdict, v.reason};
    }
    std::optional<ProcessResult> ended;
    if (facts.end) ended = facts.end->process;
    const CallVerdict v = verdict_of_stop(*facts.batch->stopped, 0, ended);
    return {v.verdict, v.reason};
  }
  if (facts.end) {
    const ProcessResult& process = facts.end->process;
    if (process.stray_processes > 0) {
      // Nothing an honest candidate does leaves a process behind; one that outlives its calls
      // could disturb the next candidates of this worker. The worker ended it.
      return {Verdict::kFlagHack, "the candidate left " + std::to_string(process.stray_processes) +
                                      " process(es) running after its calls (ended by the worker)"};
    }
    if (process.out_truncated || process.err_truncated) {
      return {Verdict::kFailResource, "the candidate flooded its output (capture capped)"};
    }
    if (auto v = verdict_of_audit(*facts.end)) return {v->verdict, v->reason};
  }
  if (!facts.batch) return {Verdict::kInfraError, "no call was made"};
  std::size_t index = 0;
  for (const CallResult& call : facts.batch->calls) {
    if (!call.check) return {Verdict::kFailRuntime, "check " + std::to_string(index) + ": no output"};
    if (!call.check->match) {
      const CallVerdict v = verdict_of_check(*call.check, "check " + std::to_string(index));
      return {v.verdict, v.reason};
    }
    ++index;
  }
  if (static_cast<int>(facts.batch->calls.size()) < facts.checks_wanted) {
    return {Verdict::kInfraError, "only " + std::to_string(facts.batch->calls.size()) + " of " +
                                      std::to_string(facts.checks_wanted) + " checks were made"};
  }
  return {Verdict::kPass, "all " + std::to_string(facts.batch->calls.size()) +
                              " checks match the reference"};
}

}  // namespace cudaagent
