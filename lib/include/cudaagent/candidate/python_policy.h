// The static policy of model_new.py: share/harness/model_policy.py parses the source with Python's
// own ast in a helper process that never executes it, and answers which rules it breaks. Key design
// choice: the operator audit runs inside the candidate's process, so whatever could switch it off
// (reflection, private attributes, frames, sys/gc/ctypes, torch's dispatcher internals, writes to
// modules) must be impossible to express; a source that names one is refused here, on the trusted
// side, before any of it runs. The rules and their verdicts are in man/cudaagent-verify.1, PYTHON
// POLICY; arithmetic on tensors is indistinguishable from arithmetic on ints and stays the runtime
// audit's to catch.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/records/verdict.h"

namespace cudaagent {

// share/harness/model_policy.py's POLICY_VERSION: the helper must announce exactly this.
inline constexpr std::string_view kPythonPolicyVersion = "model-policy-2";

struct PythonPolicyFinding {
  std::string rule;    // "python-reflection", "python-import", ... (stable: they appear in records)
  int line = 0;        // 1-based; 0 when the rule concerns the whole file
  std::string detail;  // for people: "getattr reaches attributes by a name computed at run time"
  bool tampering = false;  // a road to the audit or the harness: FLAG_HACK, not REJECT_POLICY
};

struct PythonPolicyReport {
  bool compiles = true;
  std::string compile_error;  // when !compiles: "SyntaxError: invalid syntax (line 3)"
  std::vector<PythonPolicyFinding> findings;  // at most 50, in source order per rule pass
};

// Reads the helper's answer (one JSON object). A Status when it is not one the helper gives: not
// JSON, another version, neither "findings" nor "error", a finding with missing fields.
Result<PythonPolicyReport> parse_python_policy_answer(std::string_view answer);

// Runs `python -I -S script` with `source` (model_new.py's bytes, as they will be imported) on its
// stdin, with a scrubbed environment, rlimits (CPU, address space) and `timeout_seconds`, and
// parses its answer. Use the interpreter that will import the candidate (the grammar is its own),
// by absolute path (TorchEnv::python is one): the helper gets no PATH.
// A source that makes the helper run out of time or memory is a report with one finding
// ("python-unchecked"): a source that cannot be checked is refused. A Status only when the helper
// could not run or answered out of protocol (our machinery failed, not the candidate).
// Thread-safe; blocks for one helper run (tens of milliseconds).
Result<PythonPolicyReport> check_python_policy(const std::string& python, const std::string& script,
                                               std::string_view source, double timeout_seconds = 60);

// What verify does with a report: the findings as policy findings (path "model_new.py:LINE"), and
// the verdict they call for: FLAG_HACK when any finding is tampering, else REJECT_POLICY when there
// is any finding, else FAIL_COMPILE when the source does not compile, else none (go on). `reason`
// names the finding that decided: "python-reflection: model_new.py:3: getattr ...".
//
// The check holds only if the harness imports model_new.py under a module name other than
// __main__ (the body of `if __name__ == "__main__":` is not checked) and from these same bytes.
struct PythonPolicyDecision {
  std::optional<Verdict> verdict;
  std::string reason;
  std::vector<PolicyFinding> findings;
};
PythonPolicyDecision decide_python_policy(const PythonPolicyReport& report,
                                          std::string_view file = "model_new.py");

}  // namespace cudaagent
