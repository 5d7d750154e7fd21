// Tests of the profile's kernel-trace gates on synthetic traces: kernel time assigned to the timed
// calls of each round, launcher classes and the fallback policy, every escape gate, hostile call
// marks, and a trace that cannot vouch for itself.
#include "cudaagent/profile/kernels.h"

#include <doctest/doctest.h>

#include <string>

#include "test_support.h"

using namespace cudaagent;

namespace {

constexpr std::uint32_t kPid = 4242;
const char* const kCandidate = "/jobs/job-1/work/cuda_extension.so";
const char* const kTorch = "/usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so";
const char* const kCublas = "/usr/lib/python3/dist-packages/nvidia/cublas/lib/libcublasLt.so.13";

std::string kernel(const std::string& name, std::uint64_t start, std::uint64_t end, const std::string& launcher,
                   std::uint32_t tid = kPid, std::uint32_t stream = 7, std::uint32_t correlation = 1) {
  return R"({"kind":"kernel","name":")" + name + R"(","demangled":")" + name +
         R"(_demangled","device":0,"context":1,"stream":)" + std::to_string(stream) +
         R"(,"correlation":)" + std::to_string(correlation) + R"(,"start_ns":)" + std::to_string(start) + R"(,"end_ns":)" + std::to_string(end) +
         R"(,"grid":[1,1,1],"block":[128,1,1],"shared_bytes":0,"registers":16,"graph":0,"launcher":)" +
         (launcher.empty() ? std::string("null") : "\"" + launcher + "\"") + R"(,"tid":)" + std::to_string(tid) +
         "}\n";
}

std::string summary(std::uint64_t kernels, std::uint64_t dropped = 0, bool provenance = true,
                    std::uint32_t pid = kPid, std::uint64_t launches = 1) {
  return R"({"kind":"summary","pid":)" + std::to_string(pid) + R"(,"flush":1,"records":{"kernel":)" +
         std::to_string(kernels) + R"(,"memcpy":0,"memset":0,"other":0},"dropped":)" + std::to_string(dropped) +
         R"(,"buffer_errors":0,"write_failures":0,"launches":)" + std::to_string(launches) + R"(,"unknown_launchers":0,"unresolved_walks":0,)"
         R"("provenance":)" + (provenance ? "true" : "false") +
         R"(,"clock":"monotonic","cupti_version":1,"cupti_header_version":1,"callbacks":1,"cupti_library":"x"})" "\n";
}

// Two rounds of two calls on a ms grid (ns = ms x 1e6):
//   round 0: host [10, 20] ms, calls [11, 13] and [15, 17]
//   round 1: host [30, 40] ms, calls [31, 33] and [35, 37]
// The candidate's commands are the rounds; the watch runs from 5 to 45 ms.
constexpr std::uint64_t M = 1'000'000;

KernelEvidence evidence(const KernelTrace& trace) {
  KernelEvidence e;
  e.trace = &trace;
  e.main_tid = kPid;
  e.summary.classify.candidate_paths = {"/jobs/job-1/work"};
  TracedRound r0;
  r0.host = {10 * M, 20 * M};
  r0.calls = {{11 * M, 13 * M}, {15 * M, 17 * M}};
  r0.expected_calls = 2;
  r0.event_ms = 4;
  TracedRound r1 = r0;
  r1.host = {30 * M, 40 * M};
  r1.calls = {{31 * M, 33 * M}, {35 * M, 37 * M}};
  e.rounds = {r0, r1};
  e.commands = {r0.host, r1.host};
  e.watch = {5 * M, 45 * M};
  return e;
}

// An honest trace: one candidate kernel of 1.5 ms in each call, harness work (torch) in the gaps.
std::string honest_lines() {
  std::string text;
  for (std::uint64_t call : {11, 15, 31, 35}) text += kernel("_Z4fusedPf", call * M + M / 4, call * M + M / 4 + 3 * M / 2, kCandidate);
  for (std::uint64_t gap : {10, 14, 30, 34}) text += kernel("_ZN2at6native4fillEv", gap * M + M / 10, gap * M + M / 2, kTorch);
  return text;
}

KernelAnalysis analyze(const KernelEvidence& e, KernelPolicy policy = {}) {
  auto result = analyze_kernels(e, GateSettings{}, policy);
  REQUIRE_MESSAGE(result, result.status().message());
  return result.value();
}

const GateFinding& flag(const KernelAnalysis& a, const std::string& name) {
  for (const auto& f : a.flags) {
    if (f.name == name) return f;
  }
  FAIL("no flag " << name);
  static GateFinding none;
  return none;
}

double number(const GateFinding& f, const std::string& name) {
  for (const auto& n : f.numbers) {
    if (n.name == name) return n.value;
  }
  FAIL("flag " << f.name << " has no number " << name);
  return 0;
}

std::vector<std::string> raised(const KernelAnalysis& a) {
  std::vector<std::string> names;
  for (const auto& f : a.flags) {
    if (f.raised) names.push_back(f.name);
  }
  return names;
}

}  // namespace

TEST_CASE("kernel gates: an honest trace raises nothing and its kernel time is assigned to the calls") {
  const KernelTrace trace = parse_kernel_trace(honest_lines() + summary(8));
  const KernelAnalysis a = analyze(evidence(trace));
  CHECK(raised(a).empty());
  REQUIRE(a.round_kernel_ms.size() == 2);
  // 2 calls x 1.5 ms per round; the torch fills in the gaps are not the candidate's timed work.
  CHECK(a.round_kernel_ms[0] == doctest::Approx(3.0));
  CHECK(a.round_kernel_ms[1] == doctest::Approx(3.0));
  CHECK(a.kernel_ms == doctest::Approx(6.0));
  CHECK(a.calls == 4);
  CHECK(a.class_kernel_share[static_cast<int>(LauncherClass::candidate)] == doctest::Approx(1.0));
  REQUIRE(a.timed.top.size() == 1);
  CHECK(a.timed.top[0].name == "_Z4fusedPf_demangled");
  CHECK(a.timed.top[0].calls == 4);
  CHECK(a.timed.top[0].launcher_class == LauncherClass::candidate);
  // The timer gate saw the real kernel time, over both rounds: 6 ms of kernels in 8 ms of events.
  CHECK(number(flag(a, "kernels_exceed_event"), "kernel_ms") == doctest::Approx(6.0));
  CHECK(number(flag(a, "kernels_exceed_event"), "event_ms") == doctest::Approx(8.0));
  CHECK(flag(a, "gpu_mostly_idle").raised == false);
  std::string json;
  JsonWriter writer(json);
  write_kernel_table(writer, a);
  CHECK(testing::is_valid_json(json));
  CHECK(json.find("\"total_ms\":6") != std::string::npos);
}

TEST_CASE("kernel gates: a kernel split across rounds counts only its parts inside the calls") {
  // One kernel from 12 to 16 ms: 1 ms in call [11,13], 1 ms in call [15,17], 2 ms in the gap.
  const KernelTrace trace = parse_kernel_trace(kernel("_Z4longv", 12 * M, 16 * M, kTorch) + summary(1));
  const KernelAnalysis a = analyze(evidence(trace));
  CHECK(a.round_kernel_ms[0] == doctest::Approx(2.0));
  CHECK(a.round_kernel_ms[1] == doctest::Approx(0.0));
  // It started in call 0 and ran past its end mark.
  CHECK(flag(a, "work_after_end_mark").raised);
  CHECK(number(flag(a, "work_after_end_mark"), "after_end_ms") == doctest::Approx(3.0));
}

TEST_CASE("kernel gates: events shorter than the kernels inside the calls are flagged") {
  const KernelTrace trace = parse_kernel_trace(honest_lines() + summary(8));
  KernelEvidence e = evidence(trace);
  e.rounds[1].event_ms = 1.0;  // round 1 ran 3 ms of kernels inside its calls
  const KernelAnalysis a = analyze(e);
  const GateFinding& f = flag(a, "kernels_exceed_event");
  CHECK(f.raised);
  CHECK(f.withholds_reward);
  CHECK(f.reason.rfind("round 1: ", 0) == 0);
}

TEST_CASE("kernel gates: provenance classes and the torch fallback policy") {
  // Each call: 1 ms candidate, 0.5 ms cuBLAS, and (per case) torch work.
  std::string text;
  for (std::uint64_t call : {11, 15, 31, 35}) {
    text += kernel("_Z4minev", call * M, call * M + M, kCandidate);
    text += kernel("cutlass_gemm", call * M + M, call * M + 3 * M / 2, kCublas);
  }
  SUBCASE("cuBLAS is allowed") {
    const KernelTrace trace = parse_kernel_trace(text + summary(8));
    const KernelAnalysis a = analyze(evidence(trace));
    CHECK_FALSE(flag(a, "kernel_fallback").raised);
    CHECK(a.class_kernel_share[static_cast<int>(LauncherClass::cuda_library)] == doctest::Approx(1.0 / 3));
    CHECK(a.class_kernel_share[static_cast<int>(LauncherClass::candidate)] == doctest::Approx(2.0 / 3));
  }
  SUBCASE("torch compute beyond the share is a fallback") {
    for (std::uint64_t call : {11, 15, 31, 35}) {
      text += kernel("_ZN2at6native6matmulEv", call * M + 3 * M / 2, call * M + 2 * M, kTorch);
    }
    const KernelTrace trace = parse_kernel_trace(text + summary(12));
    const KernelAnalysis a = analyze(evidence(trace));
    CHECK(flag(a, "kernel_fallback").raised);
    CHECK(flag(a, "kernel_fallback").withholds_reward);
    CHECK(number(flag(a, "kernel_fallback"), "torch_share") == doctest::Approx(0.25));
    KernelPolicy lenient;
    lenient.max_fallback_share = 0.3;
    CHECK_FALSE(flag(analyze(evidence(trace), lenient), "kernel_fallback").raised);
  }
  SUBCASE("a torch-named kernel without a launcher counts as torch (the name is a guess, never credit)") {
    text += kernel("_ZN2at6native6matmulEv", 11 * M + M / 2, 13 * M, "");  // 20% of the time
    const KernelTrace trace = parse_kernel_trace(text + summary(9));
    CHECK(flag(analyze(evidence(trace)), "kernel_fallback").raised);
  }
  SUBCASE("launchers outside the candidate and known libraries are a note, not a verdict") {
    std::string other;
    for (std::uint64_t call : {11, 15, 31, 35}) other += kernel("_Z5stealv", call * M, call * M + M, "/usr/bin/python3.11");
    const KernelTrace trace = parse_kernel_trace(other + summary(4));
    const KernelAnalysis a = analyze(evidence(trace));
    CHECK(flag(a, "kernel_unattributed").raised);
    CHECK_FALSE(flag(a, "kernel_unattributed").withholds_reward);
    CHECK_FALSE(flag(a, "kernel_fallback").raised);
  }
  SUBCASE("no launcher information cannot vouch") {
    const KernelTrace trace = parse_kernel_trace(text + summary(8, 0, /*provenance=*/false));
    CHECK(flag(analyze(evidence(trace)), "kernel_fallback").raised);
  }
}

TEST_CASE("kernel gates: work escaping the calls") {
  SUBCASE("the candidate's own kernel between two calls") {
    const KernelTrace trace = parse_kernel_trace(honest_lines() + kernel("_Z4hidev", 13 * M + M / 2, 14 * M, kCandidate) + summary(9));
    const KernelAnalysis a = analyze(evidence(trace));
    CHECK(flag(a, "work_outside_calls").raised);
    CHECK(number(flag(a, "work_outside_calls"), "candidate_ms") == doctest::Approx(0.5));
    CHECK_FALSE(flag(a, "work_after_end_mark").raised);
  }
  SUBCASE("a background thread's torch kernel between two calls") {
    const KernelTrace trace = parse_kernel_trace(honest_lines() + kernel("_Z3sinv", 13 * M + M / 2, 14 * M, kTorch, 4243) + summary(9));
    const KernelAnalysis a = analyze(evidence(trace));
    CHECK(flag(a, "work_outside_calls").raised);
    CHECK(number(flag(a, "work_outside_calls"), "background_thread_ms") == doctest::Approx(0.5));
  }
  SUBCASE("a kernel within the edge tolerance of a call is not an escape") {
    const KernelTrace trace = parse_kernel_trace(honest_lines() + kernel("_Z4edgev", 13 * M + 5000, 13 * M + 15000, kCandidate) + summary(9));
    CHECK(raised(analyze(evidence(trace))).empty());
  }
  SUBCASE("work left running after a call's end mark") {
    const KernelTrace trace = parse_kernel_trace(honest_lines() + kernel("_Z4tailv", 36 * M, 38 * M, kCandidate, kPid, 9) + summary(9));
    const KernelAnalysis a = analyze(evidence(trace));
    CHECK(flag(a, "work_after_end_mark").raised);
    CHECK(number(flag(a, "work_after_end_mark"), "after_end_ms") == doctest::Approx(1.0));
  }
  SUBCASE("work while the process had no command (the baseline's turn)") {
    const KernelTrace trace = parse_kernel_trace(honest_lines() + kernel("_Z4busyv", 22 * M, 28 * M, kTorch) + summary(9));
    const KernelAnalysis a = analyze(evidence(trace));
    CHECK(flag(a, "work_between_commands").raised);
    CHECK(number(flag(a, "work_between_commands"), "between_commands_ms") == doctest::Approx(6.0));
    CHECK_FALSE(flag(a, "work_outside_calls").raised);
  }
  SUBCASE("work before the watch (warm-up) and inside a hidden check is allowed") {
    KernelTrace trace = parse_kernel_trace(honest_lines() + kernel("_Z4warmv", 1 * M, 4 * M, kCandidate) +
                                           kernel("_Z4copyv", 22 * M, 23 * M, kTorch) + summary(10));
    KernelEvidence e = evidence(trace);
    e.commands.push_back({21 * M, 24 * M});
    CHECK(raised(analyze(e)).empty());
  }
}

TEST_CASE("kernel gates: hostile call marks") {
  const KernelTrace trace = parse_kernel_trace(honest_lines() + summary(8));
  KernelEvidence e = evidence(trace);
  SUBCASE("fewer marks than calls") { e.rounds[0].calls.pop_back(); }
  SUBCASE("a mark outside the trusted round window") { e.rounds[1].calls[1].end_ns = 41 * M; }
  SUBCASE("marks out of order") { std::swap(e.rounds[0].calls[0], e.rounds[0].calls[1]); }
  const KernelAnalysis a = analyze(e);
  CHECK(flag(a, "call_marks_invalid").raised);
  CHECK(flag(a, "call_marks_invalid").withholds_reward);
  CHECK_FALSE(a.marks_valid);
}

TEST_CASE("kernel gates: a trace that cannot vouch withholds the reward") {
  SUBCASE("no trace at all") {
    KernelTrace empty;
    KernelEvidence e = evidence(empty);
    e.trace = nullptr;
    e.trace_error = "cannot open 'kernels.trace': No such file or directory";
    const KernelAnalysis a = analyze(e);
    REQUIRE(a.flags.size() == 1);
    CHECK(a.flags[0].name == "trace_summary_missing");
    CHECK(a.flags[0].withholds_reward);
    CHECK(a.flags[0].reason.find("No such file") != std::string::npos);
  }
  SUBCASE("no summary line") {
    const KernelTrace trace = parse_kernel_trace(honest_lines());
    CHECK(flag(analyze(evidence(trace)), "trace_summary_missing").raised);
  }
  SUBCASE("a summary of another process only") {
    const KernelTrace trace = parse_kernel_trace(honest_lines() + summary(8, 0, true, 99));
    CHECK(flag(analyze(evidence(trace)), "trace_summary_missing").raised);
  }
  SUBCASE("records after the last summary") {
    const KernelTrace trace = parse_kernel_trace(summary(0) + honest_lines());
    CHECK(flag(analyze(evidence(trace)), "trace_summary_missing").raised);
  }
  SUBCASE("a rejected line") {
    const KernelTrace trace = parse_kernel_trace(honest_lines() + "{\"kind\":\"kernel\"}\n" + summary(9));
    const KernelAnalysis a = analyze(evidence(trace));
    CHECK(flag(a, "trace_lines_rejected").raised);
    CHECK_FALSE(flag(a, "trace_records_lost").raised);
  }
  SUBCASE("records dropped by CUPTI") {
    const KernelTrace trace = parse_kernel_trace(honest_lines() + summary(8, 3));
    CHECK(flag(analyze(evidence(trace)), "trace_records_lost").raised);
  }
  SUBCASE("records announced but removed from the file") {
    const KernelTrace trace = parse_kernel_trace(honest_lines() + summary(12));
    CHECK(flag(analyze(evidence(trace)), "trace_records_lost").raised);
  }
  SUBCASE("launch calls without records beyond the margin (recording switched off in the process)") {
    CHECK_FALSE(flag(analyze(evidence(parse_kernel_trace(honest_lines() + summary(8, 0, true, kPid, 24)))),
                     "trace_work_unrecorded").raised);
    const KernelAnalysis a = analyze(evidence(parse_kernel_trace(honest_lines() + summary(8, 0, true, kPid, 25))));
    CHECK(flag(a, "trace_work_unrecorded").raised);
    CHECK(flag(a, "trace_work_unrecorded").withholds_reward);
    // Above 800 calls the margin is 2% of them: 20 of 1,020, 20 of 1,030 (rounded down).
    CHECK_FALSE(flag(analyze(evidence(parse_kernel_trace(honest_lines() + summary(1000, 0, true, kPid, 1020)))),
                     "trace_work_unrecorded").raised);
    CHECK(flag(analyze(evidence(parse_kernel_trace(honest_lines() + summary(1000, 0, true, kPid, 1030)))),
               "trace_work_unrecorded").raised);
  }
}

TEST_CASE("kernel gates: bad policy settings are errors") {
  const KernelTrace trace = parse_kernel_trace(honest_lines() + summary(8));
  KernelPolicy policy;
  policy.max_fallback_share = 1.5;
  CHECK_FALSE(analyze_kernels(evidence(trace), GateSettings{}, policy));
  policy = {};
  policy.edge_tolerance_ms = -1;
  CHECK_FALSE(analyze_kernels(evidence(trace), GateSettings{}, policy));
}

// The evaluation session: the owner's call windows are the rounds and the commands; a null call of
// the runner is a command only. Calls: candidate [10, 12], null [14, 15], candidate [20, 22] ms;
// the watch from 5 to 30 ms. Kernel names only (provenance off), as a profile traces by default.
namespace {

std::vector<SessionCall> session_calls() {
  return {{{10 * M, 12 * M}, true}, {{14 * M, 15 * M}, false}, {{20 * M, 22 * M}, true}};
}

// The runner's mark after a forward at `at` ns (launches up to correlation `correlation` came
// before it), and its output copy on stream 7 from 0.1 to 0.2 ms later (correlation + 1).
std::string output_copy(std::uint64_t at, std::uint32_t correlation = 1, std::uint32_t pid = kPid) {
  return R"({"kind":"mark","pid":)" + std::to_string(pid) + R"(,"correlation":)" + std::to_string(correlation) +
         R"(,"stream":7,"at_ns":)" + std::to_string(at) + "}\n" +
         R"({"kind":"memcpy","copy":"DtoD","bytes":64,"device":0,"context":1,"stream":7,"correlation":)" +
         std::to_string(correlation + 1) + R"(,"start_ns":)" + std::to_string(at + M / 10) + R"(,"end_ns":)" +
         std::to_string(at + M / 5) + R"(,"graph":0,"launcher":null,"tid":4242})" "\n";
}

// Both candidate calls of session_calls() marked, their forwards having ended by 11 and 21 ms.
std::string session_copies() { return output_copy(11 * M) + output_copy(21 * M); }

KernelAnalysis analyze_session(const std::string& lines, const std::vector<SessionCall>& calls = session_calls(),
                               std::uint32_t pid = kPid) {
  const KernelTrace trace = parse_kernel_trace(lines);
  SummarySettings summary_settings;
  summary_settings.classify.candidate_paths = {"/jobs/job-1/work"};
  const KernelEvidence e = session_kernel_evidence(&trace, "", pid, calls, {5 * M, 30 * M}, summary_settings);
  KernelPolicy policy;
  policy.require_provenance = false;
  return analyze(e, policy);
}

}  // namespace

TEST_CASE("kernel gates in the session: the owner's windows make the rounds; names decide the fallback") {
  const std::string own =
      kernel("_Z4fusedPf", 10 * M + M / 2, 11 * M, "") + kernel("_Z4fusedPf", 20 * M + M / 2, 21 * M, "") + session_copies();
  SUBCASE("the candidate's own kernels in its calls raise nothing") {
    const KernelAnalysis a = analyze_session(own + summary(2, 0, false));
    CHECK(a.calls == 2);
    CHECK(a.kernel_ms == doctest::Approx(1.0));
    CHECK_FALSE(withholds_reward(a.flags));
    CHECK_FALSE(flag(a, "kernel_fallback").raised);
    // By names alone the candidate's kernels are "unknown": no launcher was traced to doubt.
    CHECK_FALSE(flag(a, "kernel_unattributed").raised);
  }
  SUBCASE("torch's kernels doing the work in a call (an unaudited torch fallback) withhold the reward") {
    const std::string lines = kernel("_Z4fusedPf", 10 * M + M / 2, 11 * M, "") +
                              kernel("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_10AddFunctorIfEEEEviT0_T1_",
                                     20 * M + M / 4, 21 * M, "") +
                              session_copies() + summary(2, 0, false);
    const KernelAnalysis a = analyze_session(lines);
    CHECK(flag(a, "kernel_fallback").raised);
    CHECK(flag(a, "kernel_fallback").withholds_reward);
  }
  SUBCASE("GPU work between the runner's calls (the baselines' turn) withholds the reward") {
    const KernelAnalysis a = analyze_session(own + kernel("_Z5spinv", 16 * M, 19 * M, "", kPid + 1) + summary(3, 0, false));
    CHECK(flag(a, "work_between_commands").raised);
    CHECK(withholds_reward(a.flags));
  }
  SUBCASE("the null model's copy inside its own window is not between commands") {
    const std::string copy = R"({"kind":"memcpy","copy":"DtoD","bytes":64,"device":0,"context":1,"stream":7,)"
                             R"("correlation":2,"start_ns":14500000,"end_ns":14600000,"graph":0,"launcher":null,"tid":4242})"
                             "\n";
    const KernelAnalysis a = analyze_session(own + copy + summary(2, 0, false));
    CHECK_FALSE(flag(a, "work_between_commands").raised);
    CHECK_FALSE(withholds_reward(a.flags));
  }
  SUBCASE("work past the owner's end of a call withholds the reward") {
    const KernelAnalysis a = analyze_session(kernel("_Z4fusedPf", 10 * M + M / 2, 13 * M, "") + session_copies() + summary(1, 0, false));
    CHECK(flag(a, "work_after_end_mark").raised);
  }
  SUBCASE("a call without a window leaves its work outside every command") {
    std::vector<SessionCall> calls = session_calls();
    calls[2].window = {0, 0};
    const KernelAnalysis a = analyze_session(own + summary(2, 0, false), calls);
    CHECK(a.calls == 1);
    CHECK(flag(a, "work_between_commands").raised);
  }
  SUBCASE("no summary line of the runner's process (a trace it never flushed, or another pid's)") {
    CHECK(flag(analyze_session(own), "trace_summary_missing").raised);
    CHECK(flag(analyze_session(own + summary(2, 0, false, kPid + 7)), "trace_summary_missing").raised);
  }
  SUBCASE("a forged line in the trace withholds the reward") {
    CHECK(flag(analyze_session(own + "{\"kind\":\"kernel\",\"name\":3}\n" + summary(2, 0, false)), "trace_lines_rejected").raised);
  }
  SUBCASE("provenance off raises the fallback gate only when the policy requires provenance") {
    const KernelTrace trace = parse_kernel_trace(own + summary(2, 0, false));
    const KernelEvidence e = session_kernel_evidence(&trace, "", kPid, session_calls(), {5 * M, 30 * M}, {});
    CHECK(flag(analyze(e), "kernel_fallback").raised);
  }
}

TEST_CASE("kernel gates in the session: the busy share leaves warm-up calls and the cost of a call out") {
  // Warm-up [2, 8] ms (lazy set-up, no kernels), then timed calls [10, 12] and [20, 22] ms each
  // with 0.5 ms of kernels; a null call costs 1 ms. Over every window the GPU was busy 1 ms of
  // 10 (idle); over what the candidate's code had of the timed calls, 1 ms of 2.
  const std::string own = kernel("_Z4fusedPf", 10 * M + M / 2, 11 * M, "") + kernel("_Z4fusedPf", 20 * M + M / 2, 21 * M, "") +
                          output_copy(3 * M) + session_copies();
  const std::vector<SessionCall> calls = {{{2 * M, 8 * M}, true, true},
                                          {{10 * M, 12 * M}, true, false},
                                          {{14 * M, 15 * M}, false, false},
                                          {{20 * M, 22 * M}, true, false}};
  const auto analyze_with = [&](const std::string& lines, double call_cost_ms) {
    const KernelTrace trace = parse_kernel_trace(lines);
    const KernelEvidence e = session_kernel_evidence(&trace, "", kPid, calls, {1 * M, 30 * M}, {}, call_cost_ms);
    KernelPolicy policy;
    policy.require_provenance = false;
    return analyze(e, policy);
  };
  SUBCASE("an honest candidate whose calls are mostly its kernels raises no idle note") {
    const KernelAnalysis a = analyze_with(own + summary(2, 0, false), 1.0);
    CHECK(a.calls == 3);  // the warm-up call is still checked by every gate
    CHECK(a.event_ms == doctest::Approx(10.0));
    CHECK_FALSE(flag(a, "gpu_mostly_idle").raised);
    CHECK(number(flag(a, "gpu_mostly_idle"), "busy_fraction") == doctest::Approx(0.5));
  }
  SUBCASE("without the call's cost known, the same calls read as idle") {
    CHECK(flag(analyze_with(own + summary(2, 0, false), 0.0), "gpu_mostly_idle").raised);
  }
  SUBCASE("timed calls whose GPU sits idle still raise it") {
    const std::string short_kernels = kernel("_Z4fusedPf", 10 * M + M / 2, 10 * M + M / 10 * 6, "") +
                                      kernel("_Z4fusedPf", 20 * M + M / 2, 20 * M + M / 10 * 6, "") +
                                      output_copy(3 * M) + session_copies();
    CHECK(flag(analyze_with(short_kernels + summary(2, 0, false), 1.0), "gpu_mostly_idle").raised);
  }
  SUBCASE("work of a warm-up call past its window withholds as in any other call") {
    const KernelAnalysis a = analyze_with(own + kernel("_Z4fusedPf", 7 * M, 9 * M, "") + summary(3, 0, false), 1.0);
    CHECK(flag(a, "work_after_end_mark").raised);
    CHECK(withholds_reward(a.flags));
  }
}

TEST_CASE("kernel gates in the session: no trace at all withholds the reward") {
  const KernelEvidence e = session_kernel_evidence(nullptr, "cannot open it", kPid, session_calls(), {5 * M, 30 * M}, {});
  const KernelAnalysis a = analyze(e);
  CHECK(flag(a, "trace_summary_missing").raised);
  CHECK(flag(a, "trace_summary_missing").reason.find("cannot open it") != std::string::npos);
}

TEST_CASE("kernel gates in the session: a forward's work must be finished when its output is copied") {
  // The forward of each candidate call: its kernel on the copies' stream (7) ends at 11 and 21 ms;
  // the runner marks at 11 and 21 ms and copies from 11.1 and 21.1 ms (session_copies).
  const std::string forwards = kernel("_Z4fusedPf", 10 * M + M / 2, 11 * M, "") + kernel("_Z4fusedPf", 20 * M + M / 2, 21 * M, "");
  const auto side = [](std::uint64_t start, std::uint64_t end, std::uint32_t correlation = 1) {
    return kernel("_Z5stallv", start, end, "", kPid, 9, correlation);
  };
  SUBCASE("marked calls whose side-stream work was joined back raise nothing") {
    const KernelAnalysis a = analyze_session(forwards + side(10 * M + M / 4, 10 * M + M / 2) + session_copies() + summary(3, 0, false));
    CHECK_FALSE(flag(a, "output_marks_missing").raised);
    CHECK_FALSE(flag(a, "work_after_output").raised);
    CHECK(a.output.marks == 2);
    CHECK_FALSE(withholds_reward(a.flags));
  }
  SUBCASE("work left on a stream never joined back, running past the copy, withholds the reward") {
    // A stall the forward launched on stream 9 that ends 0.4 ms after the copy began.
    const KernelAnalysis a = analyze_session(forwards + side(11 * M, 11 * M + M / 2) + session_copies() + summary(3, 0, false));
    CHECK(flag(a, "work_after_output").raised);
    CHECK(flag(a, "work_after_output").withholds_reward);
    CHECK(number(flag(a, "work_after_output"), "after_output_ms") == doctest::Approx(0.4));
    CHECK_FALSE(flag(a, "work_after_end_mark").raised);  // the runner's wait kept it inside the owner's window
  }
  SUBCASE("an overlap within the tolerance is not late work") {
    const KernelAnalysis a = analyze_session(forwards + side(11 * M, 11 * M + M / 10 + 1000) + session_copies() + summary(3, 0, false));
    CHECK_FALSE(flag(a, "work_after_output").raised);
  }
  SUBCASE("work launched after the mark on another stream withholds the reward") {
    const KernelAnalysis a = analyze_session(forwards + side(11 * M + M / 2, 11 * M + M, 3) + session_copies() + summary(3, 0, false));
    CHECK(flag(a, "work_after_output").raised);
    CHECK(number(flag(a, "work_after_output"), "after_mark_elsewhere_ms") == doctest::Approx(0.5));
  }
  SUBCASE("a timed call without a mark, a mark without a copy, or another process's mark cannot vouch") {
    CHECK(flag(analyze_session(forwards + output_copy(11 * M) + summary(2, 0, false)), "output_marks_missing").raised);
    const std::string mark_only = R"({"kind":"mark","pid":4242,"correlation":1,"stream":7,"at_ns":21000000})" "\n";
    const KernelAnalysis a = analyze_session(forwards + output_copy(11 * M) + mark_only + summary(2, 0, false));
    CHECK(flag(a, "output_marks_missing").raised);
    CHECK(flag(a, "output_marks_missing").withholds_reward);
    CHECK(number(flag(a, "output_marks_missing"), "unmarked_calls") == 1);
    CHECK(flag(analyze_session(forwards + output_copy(11 * M) + output_copy(21 * M, 1, kPid + 1) + summary(2, 0, false)),
               "output_marks_missing")
              .raised);
  }
  SUBCASE("with several forwards per call, each forward's work is held to its own copy") {
    // Call [10, 12]: forward 1 (correlation 1) marked at 10.6 ms, copied from 10.7; forward 2
    // (correlation 3) marked at 11 ms, copied from 11.1. A side kernel of forward 1 ending at
    // 10.9 ms ran past forward 1's copy, though not past forward 2's.
    const std::string two = kernel("_Z4fusedPf", 10 * M + M / 5, 10 * M + M / 2, "") + output_copy(10 * M + 6 * M / 10) +
                            kernel("_Z4fusedPf", 10 * M + 8 * M / 10, 11 * M, "", kPid, 7, 3) + output_copy(11 * M, 3) +
                            output_copy(21 * M) + summary(3, 0, false);
    CHECK_FALSE(flag(analyze_session(two), "work_after_output").raised);
    const KernelAnalysis a = analyze_session(two + side(10 * M + M / 2, 10 * M + 9 * M / 10));
    CHECK(flag(a, "work_after_output").raised);
    CHECK(number(flag(a, "work_after_output"), "after_output_ms") == doctest::Approx(0.2));
  }
}
