// How a session's call outcomes read as verdicts, once for verify and profile: a call that ended
// the session (timeout, crash, exception, memory), a check that did not match (a foreign output
// type is a rules violation; anything else a wrong answer), and how a runner process ended.
#pragma once

#include <optional>
#include <string>

#include "cudaagent/evaluation/evaluator.h"
#include "cudaagent/records/verdict.h"

namespace cudaagent {

struct CallVerdict {
  Verdict verdict = Verdict::kFailRuntime;
  std::string reason;
};

// "resource" (killed by a limit: SIGKILL, SIGXCPU, SIGXFSZ, or out of memory), "timeout", or
// "runtime".
std::string classify_runner_end(const ProcessResult& process);

// A runner process that ended (`when`: "failed before its first call", "ended during call 3").
CallVerdict verdict_of_process(const ProcessResult& process, const std::string& when);

// A batch that stopped early; `ended` is how the runner process ended, when it did.
CallVerdict verdict_of_stop(const CallStop& stop, std::size_t first_call_index,
                            const std::optional<ProcessResult>& ended);

// A check that did not match (`what`: "check 2", "timed call 17").
CallVerdict verdict_of_check(const CallCheck& check, const std::string& what);

// What the runner's operator audit saw (torch compute, values read one by one past the budget):
// REJECT_POLICY naming each finding; FLAG_HACK when its probe after an audited forward went
// unseen (the audit had been switched off in the process); FAIL_RUNTIME when the runner ended
// without its report (it exited, crashed or hung after its last answer: what the audit saw is
// unknown, so the calls' answers cannot earn a PASS); nullopt when it reported and saw nothing.
std::optional<CallVerdict> verdict_of_audit(const RunnerEnd& end);

// Whether a stop is the audit's: a call that raised while the audit had a finding (the audit
// raises to stop a forward that reads values one by one past its budget).
bool stopped_by_audit(const CallStop& stop, const RunnerEnd& end);

}  // namespace cudaagent
