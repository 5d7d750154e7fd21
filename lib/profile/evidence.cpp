// From measured rounds to the "profile" value: statistics (paired when the baselines ran beside the
// candidate, unpaired from the store), the gates that withhold reward, and the JSON that
// cudaagent-reward reads (times_ms / speedup through timing_report.h, verdict overriding PASS).
#include <cmath>
#include <filesystem>
#include <numeric>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/version.h"
#include "cudaagent/profile/timing_report.h"
#include "timing_session.h"

namespace cudaagent {
namespace {

std::string times(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3gx", x);
  return text;
}

double total(const std::vector<double>& values) { return std::accumulate(values.begin(), values.end(), 0.0); }

}  // namespace

ProfileOutcome ProfileEvidence::decide() {
  const ProfileSettings& s = *settings;
  TimingReport report;
  if (!baselines_cached) {
    auto built = build_timing_report({baselines.eager, baselines.compile, candidate}, s.bootstrap);
    if (!built) return finish(Verdict::kInfraError, "statistics: " + built.status().message());
    report = std::move(built).value();
  } else {
    auto eager = summarize_times(baselines.eager, s.bootstrap);
    auto cand = summarize_times(candidate, s.bootstrap);
    if (!eager || !cand) {
      return finish(Verdict::kInfraError, "statistics: " + (!eager ? eager : cand).status().message());
    }
    report.eager = eager.value();
    report.candidate = cand.value();
    report.speedup_eager = unpaired_speedup(report.eager, report.candidate);
    if (!baselines.compile.empty()) {
      auto compile = summarize_times(baselines.compile, s.bootstrap);
      if (!compile) return finish(Verdict::kInfraError, "statistics: " + compile.status().message());
      report.compile = compile.value();
      report.speedup_compile = unpaired_speedup(*report.compile, report.candidate);
    }
  }
  report_ = report;

  // The gates. A gate that cannot be evaluated is an error of the machinery, never a silent pass.
  std::vector<GateFinding> flags;
  const auto add = [&](Result<GateFinding> flag) -> Status {
    if (!flag) return flag.status();
    flags.push_back(std::move(flag).value());
    return Status::ok();
  };
  Status status = add(check_speedup_ceiling("eager", report.speedup_eager.median, s.flags.max_speedup));
  if (status && s.device == "cuda" && s.bandwidth_gbs > 0) {
    RooflineFacts facts;
    facts.time_ms = report.candidate.median_ms;
    facts.bytes = baselines.input_bytes + baselines.output_bytes;
    facts.bandwidth_bytes_per_s = s.bandwidth_gbs * 1e9;
    status = add(check_roofline_floor(facts, s.flags.roofline_slack));
  }
  if (status && tracing()) {
    // The timer gates with the kernels CUPTI saw inside the timed calls, and the trace's own gates.
    const KernelEvidence kernel_facts = kernel_evidence();
    auto analysis = analyze_kernels(kernel_facts, s.flags, s.kernel_policy);
    if (!analysis) {
      status = analysis.status();
    } else {
      kernels_ = std::move(analysis).value();
      flags.insert(flags.end(), kernels_->flags.begin(), kernels_->flags.end());
    }
  } else if (status) {
    // Without a trace only the event/host gate: the kernel gates need CUPTI spans (--kernel-trace).
    TimerFacts facts{total(candidate_clocks.event_ms), total(candidate_clocks.host_ms), 0};
    facts.kernel_ms = facts.event_ms;
    auto timer = check_timer_consistency(facts, s.flags);
    if (!timer) {
      status = timer.status();
    } else {
      flags.push_back(timer.value().front());
    }
  }
  if (status) status = add(check_host_overhead(candidate_clocks, baselines.eager_clocks, s.overhead));
  if (status && s.device == "cuda") {
    std::vector<double> sm, memory;
    for (const auto& reading : clocks) {
      if (!reading || reading.value().sm_mhz <= 0 || reading.value().memory_mhz <= 0) continue;
      sm.push_back(reading.value().sm_mhz);
      memory.push_back(reading.value().memory_mhz);
    }
    if (sm.size() >= 2) {
      status = add(check_clock_stability("sm", sm, s.flags.max_clock_change));
      if (status) status = add(check_clock_stability("memory", memory, s.flags.max_clock_change));
    }
  }
  if (!status) return finish(Verdict::kInfraError, "gates: " + status.message());
  if (persisting_l2_bytes && *persisting_l2_bytes > 0) {
    GateFinding flag;
    flag.name = "persisting_l2_reserved";
    flag.raised = flag.withholds_reward = true;
    flag.reason = "the candidate's process held a persisting-L2 reservation before a timed round "
                  "(research §7 case 39): cache residency bought outside the timer, reward withheld";
    flag.numbers = {{"bytes", *persisting_l2_bytes}};
    flags.push_back(flag);
  }
  flags_ = flags;
  if (withholds_reward(flags)) return finish(Verdict::kFlagHack, withholding_reason(flags));
  std::string reason = "timed: " + times(report.speedup_eager.median) + " over eager";
  if (report.speedup_compile) reason += ", " + times(report.speedup_compile->median) + " over torch.compile";
  return finish(Verdict::kPass, reason + " (" + std::to_string(checks.size()) + " hidden checks passed)");
}

bool ProfileEvidence::tracing() const { return !settings->kernel_trace_library.empty(); }

KernelEvidence ProfileEvidence::kernel_evidence() const {
  KernelEvidence e;
  e.trace = kernel_trace ? &*kernel_trace : nullptr;
  e.trace_error = kernel_trace_error.empty() ? "no trace was read" : kernel_trace_error;
  e.main_tid = candidate_pid;
  e.rounds = traced_rounds;
  e.commands = candidate_commands;
  e.watch = trace_watch;
  if (!candidate_work.empty()) {
    e.summary.classify.candidate_paths.push_back(candidate_work);
    std::error_code error;
    const std::string canonical = std::filesystem::weakly_canonical(candidate_work, error).string();
    if (!error && canonical != candidate_work) e.summary.classify.candidate_paths.push_back(canonical);
  }
  return e;
}

ProfileOutcome ProfileEvidence::finish(Verdict verdict, std::string reason) {
  const ProfileSettings& s = *settings;
  std::string out;
  JsonWriter json(out);
  json.begin_object().field("verdict", verdict_name(verdict)).field("reason", reason);
  json.field("device", s.device).field("snapshot", snapshot_hash);
  if (report_) {
    write_timing_fields(json, *report_);
    json.key("comparison").begin_object();
    json.field("eager", speedup_comparison_name(compare_speedup(report_->speedup_eager)));
    if (report_->speedup_compile) {
      json.field("compile", speedup_comparison_name(compare_speedup(*report_->speedup_compile)));
    }
    json.end_object();
  }
  json.field("pairing", baselines_cached ? "unpaired: baselines from the store"
                                         : "paired: baselines in alternating rounds");
  json.key("baselines").begin_object().field(
      "source", baselines_cached ? "store" : baselines.eager.empty() ? "not measured" : "measured");
  json.field("key", baseline_key).field("stored", baselines_stored);
  json.field("rechecked_after_stored_flag", rechecked);
  json.field("calls_per_round", baselines.calls_per_round);
  json.field("input_bytes", baselines.input_bytes).field("output_bytes", baselines.output_bytes);
  json.key("compile").begin_object().field("mode", s.compile_mode);
  json.field("status", baselines.compile_status.empty() ? std::string("not measured") : baselines.compile_status);
  json.end_object().end_object();
  json.key("flags");
  write_gate_findings(json, flags_);
  json.key("checks").begin_object().field("count", static_cast<std::int64_t>(checks.size()));
  json.key("calls").begin_array();
  for (const auto& check : checks) {
    json.begin_object().field("round", check.round).field("call", check.call).field("match", check.match);
    json.field("fingerprint_match", check.fingerprint_match).field("max_abs_error", check.max_abs_error);
    if (!check.reason.empty()) json.field("reason", check.reason);
    json.end_object();
  }
  json.end_array().end_object();
  // The CUPTI kernel table of the timed calls (--kernel-trace), and what else the trace said.
  json.key("kernels");
  if (kernels_) {
    write_kernel_table(json, *kernels_);
  } else {
    json.null();
  }
  std::string kernels_status = "not traced (no --kernel-trace)";
  if (tracing()) {
    kernels_status = kernels_ ? (kernel_trace ? "traced: kernels of " + std::to_string(kernels_->calls) +
                                                    " timed calls from the job's kernels.trace"
                                              : "no trace: " + kernel_trace_error)
                              : "traced, not analysed (the profile ended before its gates)";
  }
  json.field("kernels_status", kernels_status);
  if (kernels_) {
    json.key("kernel_trace");
    write_kernel_trace(json, *kernels_, kernel_evidence());
  }
  json.key("host_ms").begin_object().key("candidate_rounds");
  write_list(json, candidate_clocks.host_ms);
  json.key("candidate_event_sums");
  write_list(json, candidate_clocks.event_ms);
  json.key("eager_rounds");
  write_list(json, baselines.eager_clocks.host_ms);
  json.key("eager_event_sums");
  write_list(json, baselines.eager_clocks.event_ms);
  json.end_object();
  json.key("samples").begin_object().key("eager");
  write_rounds(json, baselines.eager);
  json.key("compile");
  if (baselines.compile.empty()) {
    json.null();
  } else {
    write_rounds(json, baselines.compile);
  }
  json.key("candidate");
  write_rounds(json, candidate);
  json.end_object();
  json.key("gpu").begin_object();
  if (!clocks.empty() && clocks.front()) {
    json.field("name", clocks.front().value().name).field("driver", clocks.front().value().driver);
  } else if (torch != nullptr && !torch->gpu_name.empty()) {
    json.field("name", torch->gpu_name);
  }
  json.key("clocks").begin_array();
  for (const auto& reading : clocks) {
    if (!reading) {
      json.begin_object().field("error", reading.status().message()).end_object();
      continue;
    }
    json.begin_object().field("sm_mhz", reading.value().sm_mhz).field("memory_mhz", reading.value().memory_mhz);
    json.field("temperature_c", reading.value().temperature_c).field("pstate", reading.value().pstate).end_object();
  }
  json.end_array().key("baseline_process").raw(baseline_device_json).end_object();
  json.key("candidate_process").raw(candidate_init_json);
  if (verdict != Verdict::kPass && !candidate_stderr.empty()) json.field("candidate_stderr", candidate_stderr);
  json.key("settings").begin_object().field("rounds", s.rounds).field("round_ms", s.round_ms);
  json.field("warmup_ms", s.warmup_ms).field("warmup_calls", s.warmup_calls);
  json.field("hidden_checks", s.hidden_checks).field("max_speedup", s.flags.max_speedup);
  json.field("bandwidth_gbs", s.bandwidth_gbs).field("atol", s.compare.atol).field("rtol", s.compare.rtol);
  json.field("sandbox", s.sandbox_summary).field("build_cached", build_cached).end_object();
  json.key("versions").begin_object().field("cudaagent", build_version()).field("commit", build_commit());
  if (torch != nullptr) {
    json.field("torch", torch->torch_version).field("torch_cuda", torch->torch_cuda);
    json.field("python", torch->python_version);
  }
  json.end_object();
  json.key("timings_s").begin_object();
  for (const auto& [phase, seconds] : timings) json.field(phase, seconds);
  json.field("total", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  json.end_object().end_object();
  return ProfileOutcome{verdict, std::move(reason), std::move(out)};
}

}  // namespace cudaagent
