// The verifier's judgement as a pure function of what it found (no process, no file), so every
// rule and its order of precedence is unit-tested on its own. verify.cpp gathers the facts.
//
// Order of precedence, first match wins:
//   static policy findings (the snapshot, the sources, the objects)      REJECT_POLICY / FLAG_HACK
//   the build failed                                                     FAIL_COMPILE (or RESOURCE)
//   the task itself could not be loaded or the machinery failed          INFRA_ERROR
//   the runner never got ready (import or construction failed, hung)    FAIL_RUNTIME / TIMEOUT / RESOURCE
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

#include "cudaagent/evaluation/evaluator.h"
#include "cudaagent/records/verdict.h"

namespace cudaagent {

struct PolicyVerdict {
  Verdict verdict = Verdict::kRejectPolicy;  // REJECT_POLICY or FLAG_HACK
  std::string reason;
};

struct VerifyFacts {
  std::optional<PolicyVerdict> policy;  // the first static finding, if any
  bool built = false;
  bool build_ok = false;
  bool build_resource = false;          // the build hit a resource limit
  std::string build_reason;
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
