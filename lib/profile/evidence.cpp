// From measured rounds to the "profile" value: statistics (paired when the baselines ran beside the
// candidate, unpaired from the store), the gates that withhold reward, and the JSON that
// cudaagent-reward reads (times_ms / speedup through timing_report.h, verdict overriding PASS).
#include <cmath>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/version.h"
#include "cudaagent/evaluation/evaluator.h"
#include "cudaagent/profile/timing_report.h"
#include "cudaagent/profile/timing_stats.h"
#include "measurement.h"

namespace cudaagent {
namespace {

std::string times(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3gx", x);
  return text;
}

}  // namespace

Result<TimingReport> ProfileEvidence::timing_report(const RoundSamples& candidate_samples) const {
  const ProfileSettings& s = *settings;
  if (!baselines_cached) {
    return build_timing_report({baselines.eager, baselines.compile, candidate_samples}, s.bootstrap);
  }
  TimingReport report;
  auto eager = summarize_times(baselines.eager, s.bootstrap);
  if (!eager) return eager.status();
  auto cand = summarize_times(candidate_samples, s.bootstrap);
  if (!cand) return cand.status();
  report.eager = eager.value();
  report.candidate = cand.value();
  report.speedup_eager = unpaired_speedup(report.eager, report.candidate);
  if (!baselines.compile.empty()) {
    auto compile = summarize_times(baselines.compile, s.bootstrap);
    if (!compile) return compile.status();
    report.compile = compile.value();
    report.speedup_compile = unpaired_speedup(*report.compile, report.candidate);
  }
  return report;
}

// Where the candidate's runner costs more per call than the baselines' (candidate_cost removed the
// baselines' cost), each speedup's interval reaches up to where it would be with the runner's own
// cost removed instead. Only the upper end moves: the median, the gates and the reward (which reads
// the lower end) stay on the lower cost, so a process that slows its own null calls widens its
// interval upwards and gains nothing; an honest kernel of a few microseconds is no longer "slower"
// for its process's call cost alone.
Status ProfileEvidence::reach_own_cost(TimingReport& report) const {
  if (candidate_at_own_cost.empty()) return Status::ok();
  auto own = timing_report(candidate_at_own_cost);
  if (!own) return own.status();
  reach_upper_ends(report, own.value());
  return Status::ok();
}

ProfileOutcome ProfileEvidence::decide() {
  const ProfileSettings& s = *settings;
  auto built = timing_report(candidate);
  if (!built) return finish(Verdict::kInfraError, "statistics: " + built.status().message());
  TimingReport report = std::move(built).value();
  if (Status reached = reach_own_cost(report); !reached) {
    return finish(Verdict::kInfraError, "statistics: " + reached.message());
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
  if (kernels) flags.insert(flags.end(), kernels->flags.begin(), kernels->flags.end());
  flags_ = flags;
  if (withholds_reward(flags)) return finish(Verdict::kFlagHack, withholding_reason(flags));
  std::string reason = "timed: " + times(report.speedup_eager.median) + " over eager";
  if (report.speedup_compile) reason += ", " + times(report.speedup_compile->median) + " over torch.compile";
  const std::string forwards =
      forwards_per_call > 1 ? ", " + std::to_string(checked_calls * forwards_per_call) + " forwards" : "";
  return finish(Verdict::kPass, reason + " (every one of " + std::to_string(checked_calls) +
                                    " candidate calls checked" + forwards + ")");
}

Status ProfileEvidence::analyze_trace(const std::string& path, const std::string& work_dir) {
  auto read = read_kernel_trace(path);
  std::string error;
  if (read) {
    trace = std::move(read).value();
  } else {
    error = read.status().message();
  }
  SummarySettings summary;
  summary.classify.candidate_paths = {work_dir};
  kernel_evidence = session_kernel_evidence(trace ? &*trace : nullptr, error, runner_pid, runner_calls,
                                            {watch_start_ns, watch_end_ns}, summary, candidate_window_cost_low_ms);
  KernelPolicy policy = settings->kernel_policy;
  policy.require_provenance = settings->kernel_provenance;
  auto analysis = analyze_kernels(kernel_evidence, settings->flags, policy);
  if (!analysis) return Status::error("kernel trace: " + analysis.status().message());
  kernels = std::move(analysis).value();
  kernels_status = std::string("traced (") + (settings->kernel_provenance ? "launchers" : "kernel names") + ")";
  return Status::ok();
}

// The record's "profile" value, field after field in the order cudaagent-records(5) lists them:
// one writer, so the record's layout reads top to bottom.
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
  json.end_object();
  if (baseline_mismatches > 0) {
    json.field("mismatches", baseline_mismatches).field("note", baseline_notes);
  }
  json.end_object();
  json.key("flags");
  write_gate_findings(json, flags_);
  json.key("checks").begin_object().field("calls", checked_calls);
  json.field("forwards", checked_calls * forwards_per_call).field("forwards_per_call", forwards_per_call);
  json.field("all_checked", true).end_object();
  json.key("rounds").begin_object().field("run", rounds_run).field("stop", rounds_stop);
  json.key("half_width");
  if (rounds_half_width) {
    json.value(*rounds_half_width);
  } else {
    json.null();
  }
  json.end_object();
  json.key("kernels");
  if (kernels) {
    write_kernel_table(json, *kernels);
  } else {
    json.null();
  }
  json.field("kernels_status", kernels_status);
  if (kernels) {
    json.key("kernel_trace");
    write_kernel_trace(json, *kernels, kernel_evidence);
  }
  // The cost of a call itself: the null model's median per round, and what was removed from every
  // sample (the null calls' 10th percentile).
  json.key("call_cost").begin_object().key("round_medians_ms");
  write_list(json, call_cost_ms);
  json.field("removed_ms", call_cost_removed_ms);
  const auto spin_ms = call_spin_ms(settings->call_wait, settings->device);
  json.field("wait", spin_ms && spin_ms.value() > 0 ? "spin" : "block").key("owner_ms").begin_object();
  for (const auto& [name, ms] : owner_ms) json.field(name, ms);
  json.end_object();
  // The candidate's runner's own cost of a call, and what was removed from the candidate's samples:
  // the lower of the two. Where its process costs more than the baseline's, the speedups' intervals
  // reach up to the speedup at its own cost (reach_own_cost).
  json.key("candidate_arm").begin_object().key("round_medians_ms");
  write_list(json, candidate_call_cost_ms);
  json.field("low_ms", candidate_call_cost_low_ms).field("window_low_ms", candidate_window_cost_low_ms);
  json.field("removed_ms", candidate_cost_removed_ms);
  json.field("interval_reaches_own_cost", !candidate_at_own_cost.empty()).end_object();
  // Where a call's time goes, per model: the median over rounds of each round's median phase.
  // The candidate's rows rest partly on its own runner's account.
  if (!call_phases_ms.empty()) {
    json.key("phases_ms").begin_object();
    for (const auto& [model, phases] : call_phases_ms) {
      json.key(model).begin_object();
      for (const auto& [phase, medians] : phases) json.field(phase, median_of(medians));
      json.end_object();
    }
    json.end_object();
  }
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
  json.end_array().end_object();
  if (placement != nullptr) {
    json.key("placement").begin_object();
    if (placement->placed()) {
      json.field("owner", cpu_list_text(placement->owner)).field("baseline", cpu_list_text(placement->baseline));
      json.field("candidate", cpu_list_text(placement->candidate));
    } else {
      json.field("note", placement->note);
    }
    json.end_object();
  }
  json.key("sandbox").begin_object().field("launcher", s.sandbox_summary).key("layers").begin_array();
  for (const auto& layer : sandbox_layers) json.value(layer);
  json.end_array().end_object();
  if (verdict != Verdict::kPass && !candidate_stderr.empty()) json.field("candidate_stderr", candidate_stderr);
  json.key("settings").begin_object().field("rounds", s.rounds).field("round_ms", s.round_ms);
  json.field("max_rounds", std::max(s.rounds, s.max_rounds)).field("target_ci", s.target_ci);
  json.field("rounds_seconds", s.rounds_seconds);
  json.field("warmup_ms", s.warmup_ms).field("warmup_calls", s.warmup_calls);
  json.field("max_speedup", s.flags.max_speedup).field("call_wait", s.call_wait);
  json.field("call_diagnostics", s.call_diagnostics).field("forwards_per_call", s.forwards_per_call);
  json.field("forward_sync", s.forward_sync).field("call_timer", s.call_timer).field("call_lead_us", s.call_lead_us);
  json.field("cpu_groups", s.cpu_groups).field("baseline_trace", s.baseline_trace);
  json.field("bandwidth_gbs", s.bandwidth_gbs).field("atol", s.atol).field("rtol", s.rtol);
  json.field("python_policy", s.python_policy).field("build_cached", build_cached);
  json.field("host_optimization", s.build.host_optimization).end_object();
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
