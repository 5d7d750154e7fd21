// The lines the C++ driver exchanges with the session owner (share/harness/session_owner.py's
// commands), built and read in one place. Pure functions: no process, no I/O. The owner is
// trusted, but the "runner" parts of its answers are a candidate's own words relayed: they are
// read with limits and only ever lower a verdict.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/evaluation/evaluator.h"

namespace cudaagent {

std::string owner_command(const std::string& cmd, const std::string& arm);
std::string owner_init_command(std::uint64_t seed, const std::string& socket_dir,
                               const std::string& state_dir, double atol, double rtol);
std::string owner_attach_command(const std::string& arm, const std::string& token, double timeout_seconds,
                                 int forwards = 1);
std::string owner_calls_command(const std::string& arm, const std::string& model,
                                const std::vector<std::uint64_t>& seeds, double timeout_seconds, bool flush,
                                double audit_fraction);

// {"ok": true, "input_bytes", "output_bytes", ...} -> TaskInfo (layout_json is the whole line);
// {"ok": false, "error"} or anything else -> a Status with the owner's words.
Result<TaskInfo> parse_owner_init(const std::string& line);
// The runner's "ready" message (minified JSON) from an attach answer; a Status with the reason.
Result<std::string> parse_owner_attach(const std::string& line);
// The sandbox layers a runner says held (at most 16 names of at most 64 bytes).
std::vector<std::string> ready_sandbox_layers(const std::string& ready_json);
// The process id a runner gave in its "ready" message; 0 when it gave none that fits 32 bits.
std::uint32_t ready_pid(const std::string& ready_json);
// A "calls" answer. Malformed: a Status.
Result<CallBatch> parse_owner_calls(const std::string& line);
// A "detach" answer's runner report into end.forbidden_ops (at most 64 names); sets end.reported.
void parse_runner_report(const std::string& line, RunnerEnd& end);

}  // namespace cudaagent
