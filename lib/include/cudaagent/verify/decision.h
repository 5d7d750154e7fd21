// The verifier's judgement as a pure function of what it found (no process, no file), so every
// rule and its order of precedence is unit-tested on its own. verify.cpp gathers the facts.
//
// Order of precedence, first match wins:
//   tampering found by a static policy (the snapshot's first)            FLAG_HACK
//   static policy findings (the snapshot's, then model_new.py's)         REJECT_POLICY
//   model_new.py does not compile (its static policy parsed it)          FAIL_COMPILE
//   the build failed                                                     FAIL_COMPILE (or RESOURCE)
//   the built objects' findings (object_policy.h): a tampering rule      FLAG_HACK
//     (dynamic lookup, raw system calls, dispatch-key state, running
//     Python code, writable code), any other rule                        REJECT_POLICY
//   the task itself could not be loaded or the machinery failed          INFRA_ERROR
//   the runner never got ready (import or construction failed, hung)     FAIL_RUNTIME / TIMEOUT / RESOURCE
//   a call raised and the audit saw torch compute in forward, or values  REJECT_POLICY
//     read one by one past its budget (it raises to stop such a forward)
//   a call ended the session (timeout, crash, exception)                 FAIL_TIMEOUT / RESOURCE / RUNTIME
//   the runner left processes behind                                     FLAG_HACK
//   the runner flooded its output                                        FAIL_RESOURCE
//   the audit saw torch compute in forward                               REJECT_POLICY
//   a call's output did not match the reference                          FAIL_INCORRECT
//   otherwise                                                            PASS
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/candidate/static_policy.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/evaluation/evaluator.h"
#include "cudaagent/records/verdict.h"

namespace cudaagent {

struct VerifyFacts {
  // The static policies' verdicts (candidate/static_policy.h, the rules verify and profile share).
  std::optional<PolicyVerdict> policy;  // the first static finding, if any
  // model_new.py's static policy (candidate/python_policy.h), when it ran and called for a verdict:
  // FLAG_HACK, REJECT_POLICY or FAIL_COMPILE (decide_python_policy), with its decisive finding.
  std::optional<PolicyVerdict> python_policy;
  bool built = false;
  bool build_ok = false;
  bool build_resource = false;          // the build hit a resource limit
  std::string build_reason;
  // What the objects built from kernels/* import against the allow-list; checked only after a
  // build that succeeded, before anything of the candidate runs.
  std::vector<PolicyFinding> object_findings;
  std::optional<std::string> infra;     // the machinery or the task failed: why
  std::optional<RunnerStart> start;     // the runner's start (set once attached or tried)
  std::optional<CallBatch> batch;       // the checked calls
  std::optional<RunnerEnd> end;         // how the runner ended
  int checks_wanted = 0;
};

struct VerifyDecision {
  Verdict verdict = Verdict::kInfraError;
  std::string reason;
};

VerifyDecision decide_verify(const VerifyFacts& facts);

}  // namespace cudaagent
