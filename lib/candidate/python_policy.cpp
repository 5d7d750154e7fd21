// The driver of share/harness/model_policy.py: one short helper run per candidate (the interpreter
// starts in tens of milliseconds without site or torch), the source on stdin, one JSON line back.
// The helper parses hostile text, so it runs under rlimits and a deadline, and running out of them
// refuses the source rather than failing the machinery.
#include "cudaagent/candidate/python_policy.h"

#include <simdjson.h>

#include "cudaagent/base/session.h"
#include "cudaagent/sandbox/process.h"

namespace cudaagent {
namespace {

// A 1 MiB source parses in well under a second into well under 1 GiB; these bound a hostile one.
constexpr std::uint64_t kAddressSpaceBytes = std::uint64_t{4} << 30;
constexpr std::uint64_t kCpuSeconds = 60;
constexpr std::size_t kAnswerBytes = std::size_t{1} << 20;

std::string last_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (const auto cut = text.rfind('\n'); cut != std::string_view::npos) text.remove_prefix(cut + 1);
  return std::string(text.substr(0, 300));
}

PythonPolicyReport unchecked(const std::string& why) {
  PythonPolicyReport report;
  report.findings.push_back({"python-unchecked", 0, "model_new.py cannot be checked: " + why, false});
  return report;
}

}  // namespace

Result<PythonPolicyReport> parse_python_policy_answer(std::string_view answer) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  const auto bad = [&](const std::string& why) {
    return Status::error("the policy helper answered out of protocol (" + why + "): " +
                         quoted(answer.substr(0, 200)));
  };
  if (parser.parse(answer.data(), answer.size()).get(object)) return bad("not a JSON object");
  std::string_view version;
  if (object["version"].get(version) || version != kPythonPolicyVersion) {
    return bad("expected version " + std::string(kPythonPolicyVersion));
  }
  PythonPolicyReport report;
  std::string_view error;
  if (!object["error"].get(error)) {
    report.compiles = false;
    report.compile_error = std::string(error);
    return report;
  }
  simdjson::dom::array findings;
  if (object["findings"].get(findings)) return bad("no findings");
  for (simdjson::dom::element item : findings) {
    PythonPolicyFinding finding;
    std::string_view rule, detail;
    std::int64_t line = 0;
    if (item["rule"].get(rule) || item["detail"].get(detail) || item["line"].get(line) ||
        item["tampering"].get(finding.tampering) || line < 0 || line > (1 << 30)) {
      return bad("a malformed finding");
    }
    finding.rule = std::string(rule);
    finding.detail = std::string(detail);
    finding.line = static_cast<int>(line);
    report.findings.push_back(std::move(finding));
  }
  return report;
}

Result<PythonPolicyReport> check_python_policy(const std::string& python, const std::string& script,
                                               std::string_view source, double timeout_seconds) {
  ProcessSpec spec;
  // -I: no user site, no PYTHON* variables, no script directory on sys.path; -S: no site module
  // (nothing but the standard library's ast and json is needed).
  spec.argv = {python, "-I", "-S", script};
  spec.env = {"LC_ALL=C.UTF-8"};
  spec.stdin_data = std::string(source);
  spec.stdout_cap = kAnswerBytes;
  spec.stderr_cap = 64 * 1024;
  spec.timeout_seconds = timeout_seconds;
  spec.limits.address_space_bytes = kAddressSpaceBytes;
  spec.limits.cpu_seconds = kCpuSeconds;
  spec.limits.file_size_bytes = kAnswerBytes;
  auto ran = run_process(spec);
  if (!ran) return ran.status();
  const ProcessResult& run = ran.value();
  using Outcome = ProcessResult::Outcome;
  if (run.outcome == Outcome::kSpawnFailed) {
    return Status::error("cannot run the policy helper: " + run.spawn_error);
  }
  // Out of time, CPU or memory on a source of at most the snapshot's file limit: the source did
  // it, and what cannot be checked is refused.
  if (run.outcome == Outcome::kTimedOut || run.outcome == Outcome::kSignaled) {
    return unchecked("the checker " + run.describe());
  }
  if (run.err.find("MemoryError") != std::string::npos) return unchecked("the checker ran out of memory");
  if (run.exit_code != 0 || run.out_truncated) {
    return Status::error("the policy helper " + run.describe() + ": " + last_line(run.err));
  }
  return parse_python_policy_answer(run.out);
}

PythonPolicyDecision decide_python_policy(const PythonPolicyReport& report, std::string_view file) {
  PythonPolicyDecision decision;
  const PythonPolicyFinding* first = nullptr;
  const PythonPolicyFinding* first_tampering = nullptr;
  for (const auto& finding : report.findings) {
    std::string path(file);
    if (finding.line > 0) path += ":" + std::to_string(finding.line);
    decision.findings.push_back({finding.rule, path, finding.detail});
    if (first == nullptr) first = &finding;
    if (finding.tampering && first_tampering == nullptr) first_tampering = &finding;
  }
  const PythonPolicyFinding* decisive = first_tampering != nullptr ? first_tampering : first;
  if (decisive != nullptr) {
    decision.verdict = first_tampering != nullptr ? Verdict::kFlagHack : Verdict::kRejectPolicy;
    const std::size_t index = static_cast<std::size_t>(decisive - report.findings.data());
    const PolicyFinding& shown = decision.findings[index];
    decision.reason = shown.rule + ": " + shown.path + ": " + shown.detail;
  } else if (!report.compiles) {
    decision.verdict = Verdict::kFailCompile;
    decision.reason = std::string(file) + " does not compile: " + report.compile_error;
  }
  return decision;
}

}  // namespace cudaagent
