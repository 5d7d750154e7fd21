// The static policies as verify and profile both run them (static_policy.h): one order, one set of
// reasons and timing names, so the two stages cannot drift apart.
#include "cudaagent/candidate/static_policy.h"

#include <chrono>

#include "cudaagent/base/files.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/candidate/object_policy.h"
#include "cudaagent/candidate/python_policy.h"
#include "cudaagent/candidate/source_policy.h"

namespace cudaagent {
namespace {

using SteadyClock = std::chrono::steady_clock;

double since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace

Result<StaticPolicy> load_static_policy(bool python_policy, const std::string& python,
                                        const std::string& share, std::string object_policy_json) {
  StaticPolicy policy;
  policy.python_policy = python_policy;
  policy.python = python;
  policy.model_policy_script = share + "/harness/model_policy.py";
  policy.object_policy_json =
      object_policy_json.empty() ? share + "/harness/policy.json" : std::move(object_policy_json);
  if (python_policy) {
    std::string script;
    if (!read_whole_file(policy.model_policy_script, script)) {
      return Status::error("cannot read the harness script '" + policy.model_policy_script + "'");
    }
    policy.model_policy_hash = sha256_hex(script);
  }
  return policy;
}

std::optional<PolicyVerdict> decide_static_policy(const std::optional<PolicyVerdict>& source,
                                                  const std::optional<PolicyVerdict>& python) {
  for (const auto* found : {&source, &python}) {
    if (*found && (*found)->verdict == Verdict::kFlagHack) return *found;
  }
  if (source) return source;
  return python;
}

std::vector<PolicyFinding> scan_candidate_sources(const std::map<std::string, std::string>& files) {
  std::vector<PolicyFinding> findings;
  for (const auto& found : scan_torch_calls(files, default_allowed_torch_calls())) {
    findings.push_back({"torch-compute-in-source", found.file + ":" + std::to_string(found.line),
                        found.call + " computes with torch; only the candidate's own kernels may compute"});
  }
  for (const auto& found : scan_line_directives(files)) {
    findings.push_back({"line-directive", found.file + ":" + std::to_string(found.line),
                        found.call + " changes which file and line the compiler records for the code "
                        "after it; the object check reads them"});
  }
  for (const auto& found : scan_macros_before_python_headers(files)) {
    findings.push_back({"macro-before-header", found.file + ":" + std::to_string(found.line),
                        found.call + ": a macro defined before torch's, pybind11's or Python's headers "
                        "rewrites their code; include them first"});
  }
  for (const auto& found : scan_pybind11_namespace(files)) {
    findings.push_back({"pybind11-namespace", found.file + ":" + std::to_string(found.line),
                        found.call + ": the candidate's code may not add to pybind11's namespace, "
                        "whose callbacks the object check counts as pybind11's own"});
  }
  return findings;
}

SourcePolicyOutcome check_source_policies(const Snapshot& snapshot, const StaticPolicy& policy) {
  SourcePolicyOutcome outcome;
  outcome.findings = snapshot.findings;
  for (PolicyFinding& found : scan_candidate_sources(snapshot.files)) outcome.findings.push_back(std::move(found));
  const auto model_new = snapshot.files.find("model_new.py");
  if (model_new == snapshot.files.end()) {
    outcome.findings.push_back({"missing-file", "model_new.py", "the candidate has no model_new.py"});
  }
  if (!outcome.findings.empty()) {
    const auto& first = outcome.findings.front();
    outcome.source = PolicyVerdict{Verdict::kRejectPolicy, first.rule + ": " + first.path + ": " + first.detail};
  }
  if (model_new == snapshot.files.end() || !policy.python_policy) return outcome;
  const auto phase = SteadyClock::now();
  auto report = check_python_policy(policy.python, policy.model_policy_script, model_new->second);
  outcome.timings.emplace_back("python_policy", since(phase));
  if (!report) {
    outcome.infra = "python policy: " + report.status().message();
    return outcome;
  }
  PythonPolicyDecision decision = decide_python_policy(report.value());
  outcome.findings.insert(outcome.findings.end(), decision.findings.begin(), decision.findings.end());
  if (decision.verdict) outcome.python = PolicyVerdict{*decision.verdict, std::move(decision.reason)};
  return outcome;
}

ObjectPolicyOutcome check_object_policy(const BuildResult& build, const StaticPolicy& policy,
                                        const std::function<Result<ProcessResult>(const ProcessSpec&)>& runner) {
  ObjectPolicyOutcome outcome;
  const auto phase = SteadyClock::now();
  auto findings = check_objects(build, policy.object_policy_json, runner);
  outcome.timings.emplace_back("objects", since(phase));
  if (!findings) {
    outcome.infra = "object check: " + findings.status().message();
  } else {
    outcome.findings = std::move(findings).value();
  }
  return outcome;
}

std::optional<PolicyVerdict> object_policy_verdict(const std::vector<PolicyFinding>& findings) {
  const PolicyFinding* finding = strongest_finding(findings);
  if (finding == nullptr) return std::nullopt;
  // FLAG_HACK when any finding's rule is tampering, else REJECT_POLICY; the reason names a finding
  // of that class (a candidate that both computes with torch and calls dlsym: the dlsym).
  return PolicyVerdict{verdict_of_findings(findings), finding->rule + ": " + finding->path + ": " + finding->detail};
}

}  // namespace cudaagent
