// The verdicts of call outcomes (call_verdicts.h).
#include "cudaagent/evaluation/call_verdicts.h"

#include <csignal>

namespace cudaagent {
namespace {

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto cut = text.rfind('\n');
  std::string line = cut == std::string::npos ? text : text.substr(cut + 1);
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

// The inputs are mapped read-only, so an in-place write to an input (or to an output that aliases
// one) faults instead of passing: say so where a call ended that way.
std::string fault_note(const std::string& text) {
  return text.find("SIGSEGV") != std::string::npos || text.find("illegal memory access") != std::string::npos
             ? " (the inputs are read-only: a write to an input ends a call this way)"
             : "";
}

bool out_of_memory(const std::string& text) {
  return text.find("MemoryError") != std::string::npos || text.find("out of memory") != std::string::npos;
}

}  // namespace

std::string classify_runner_end(const ProcessResult& process) {
  if (process.outcome == ProcessResult::Outcome::kTimedOut) return "timeout";
  if (process.outcome == ProcessResult::Outcome::kSignaled &&
      (process.signal == SIGKILL || process.signal == SIGXCPU || process.signal == SIGXFSZ)) {
    return "resource";
  }
  return out_of_memory(last_line(process.err)) ? "resource" : "runtime";
}

CallVerdict verdict_of_process(const ProcessResult& process, const std::string& when) {
  const std::string kind = classify_runner_end(process);
  const std::string tail = last_line(process.err);
  const std::string said = "the candidate " + when + " (" + process.describe() + ")" +
                           (tail.empty() ? "" : ": " + tail) + fault_note(process.describe() + tail);
  if (kind == "timeout") return {Verdict::kFailTimeout, said};
  if (kind == "resource") return {Verdict::kFailResource, said};
  return {Verdict::kFailRuntime, said};
}

CallVerdict verdict_of_stop(const CallStop& stop, std::size_t first_call_index,
                            const std::optional<ProcessResult>& ended) {
  const std::string call = "call " + std::to_string(first_call_index + stop.call);
  if (stop.why == "timeout") return {Verdict::kFailTimeout, call + ": " + stop.detail};
  if (stop.why == "runner ended" && ended) return verdict_of_process(*ended, "ended during " + call);
  const std::string detail = last_line(stop.detail);
  if (out_of_memory(detail)) return {Verdict::kFailResource, call + ": the candidate ran out of memory: " + detail};
  return {Verdict::kFailRuntime, call + ": the candidate " + (stop.why == "runner error" ? "raised: " : stop.why + ": ") +
                                     detail + fault_note(stop.detail)};
}

CallVerdict verdict_of_check(const CallCheck& check, const std::string& what) {
  // A foreign output type (a tensor subclass, an object) is a rules violation, not a wrong answer:
  // its own methods could have answered a comparison that trusted it.
  const Verdict verdict = check.failure == "type" ? Verdict::kRejectPolicy : Verdict::kFailIncorrect;
  return {verdict, what + ": " + check.reason};
}

std::optional<CallVerdict> verdict_of_audit(const RunnerEnd& end) {
  if (!end.reported) {
    return CallVerdict{Verdict::kFailRuntime,
                       "the candidate's process ended without the operator audit's report (" +
                           end.process.describe() + "): what its forwards ran is unknown"};
  }
  if (end.audit_off > 0) {
    return CallVerdict{Verdict::kFlagHack,
                       "the operator audit was switched off inside the candidate's process (its "
                       "probe went unseen after " + std::to_string(end.audit_off) + " audited forward" +
                           (end.audit_off == 1 ? "" : "s") + ")"};
  }
  if (end.forbidden_ops.empty()) return std::nullopt;
  std::string names;
  for (const auto& [name, count] : end.forbidden_ops) {
    names += (names.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  }
  return CallVerdict{Verdict::kRejectPolicy,
                     "the candidate's forward computed outside its own kernels: " + names.substr(0, 300)};
}

bool stopped_by_audit(const CallStop& stop, const RunnerEnd& end) {
  return stop.why == "runner error" && !end.forbidden_ops.empty();
}

}  // namespace cudaagent
