// The static policies of a candidate, in one place for every stage that runs its code: verify
// checks it, profile times it, and a timed candidate must pass the same static rules as a checked
// one. Two steps, in the order their inputs exist, neither running anything of the candidate:
//   before the build: the snapshot's findings, torch compute calls in its C++ sources
//     (source_policy.h), a missing model_new.py, and model_new.py's own policy (python_policy.h);
//   after a build that succeeded: what the candidate's objects import (object_policy.h).
// Each step returns its findings, its verdict and its timings; the stage decides when to stop.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/candidate/extension_build.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/records/verdict.h"
#include "cudaagent/sandbox/process.h"

namespace cudaagent {

struct PolicyVerdict {
  Verdict verdict = Verdict::kRejectPolicy;  // REJECT_POLICY or FLAG_HACK (FAIL_COMPILE: python)
  std::string reason;
};

// How a stage runs the policies; made once per stage by load_static_policy().
struct StaticPolicy {
  // model_new.py's static check. Off only to test the layers beneath it (the runtime audit, the
  // session's timing) with candidates it would refuse.
  bool python_policy = true;
  std::string python;                // the interpreter that will import model_new.py, absolute
  std::string model_policy_script;   // share/harness/model_policy.py
  std::string object_policy_json;    // share/harness/policy.json: the allowed operators
  std::string model_policy_hash;     // SHA-256 of the script's bytes; empty when off

  // What the policy adds to the key of a stored result: the script's hash, or "off", so a result
  // made with the check off is never reused with it on (the script is outside the harness hash).
  std::string key() const { return python_policy ? model_policy_hash : std::string("off"); }
};

// The policy of share directory `share` (share_dir()), run by `python`, with the allowed operators
// of `object_policy_json` (share/harness/policy.json when empty). Reads the Python policy's script
// for its hash when that policy is on; a Status when it cannot be read.
Result<StaticPolicy> load_static_policy(bool python_policy, const std::string& python,
                                        const std::string& share, std::string object_policy_json = {});

// The first step's verdict from its two parts, first match wins: FLAG_HACK of either, then the
// source policy's, then model_new.py's (whose FAIL_COMPILE is the weakest). Pure.
std::optional<PolicyVerdict> decide_static_policy(const std::optional<PolicyVerdict>& source,
                                                  const std::optional<PolicyVerdict>& python);

struct SourcePolicyOutcome {
  // The snapshot's, torch-compute-in-source, missing-file, then model_new.py's (as records list).
  std::vector<PolicyFinding> findings;
  std::optional<PolicyVerdict> source;  // the first finding of all but model_new.py's
  std::optional<PolicyVerdict> python;  // decide_python_policy's, when it called for a verdict
  std::optional<std::string> infra;     // the policy helper itself failed: "python policy: ..."
  std::vector<std::pair<std::string, double>> timings;  // "python_policy", when it ran

  std::optional<PolicyVerdict> verdict() const { return decide_static_policy(source, python); }
  // Whether the stage stops here (a verdict, or machinery that failed).
  bool stops() const { return source || python || infra; }
};

// The source scans of the first step, as findings: torch-compute-in-source, line-directive,
// macro-before-header. Shared with the agent's compile tool, which shows them before it builds.
std::vector<PolicyFinding> scan_candidate_sources(const std::map<std::string, std::string>& files);

// The first step, on the snapshot before anything is built. model_new.py's policy runs after a
// finding of the others too, so tampering is still flagged. Blocks for one helper run.
SourcePolicyOutcome check_source_policies(const Snapshot& snapshot, const StaticPolicy& policy);

struct ObjectPolicyOutcome {
  std::vector<PolicyFinding> findings;
  std::optional<std::string> infra;  // nm or objdump could not run: "object check: ..."
  std::vector<std::pair<std::string, double>> timings;  // "objects"
};

// The second step, on a build that succeeded: the objects of the candidate's own sources read with
// nm and objdump through `runner` (the build's sandboxed runner; run_process when empty).
ObjectPolicyOutcome check_object_policy(const BuildResult& build, const StaticPolicy& policy,
                                        const std::function<Result<ProcessResult>(const ProcessSpec&)>& runner);

// The verdict object findings earn (object_policy.h), its reason naming the strongest finding;
// none when there are no findings. Pure.
std::optional<PolicyVerdict> object_policy_verdict(const std::vector<PolicyFinding>& findings);

}  // namespace cudaagent
