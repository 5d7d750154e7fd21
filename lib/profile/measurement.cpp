// Warm-up and alternating rounds in the task's evaluation session. Each round draws fresh seeds,
// runs every arm on them in a random order (so drift and any effect of one arm on the next are
// shared out), and keeps the owner's host times. The null model's calls measure the cost of a call
// itself (copying inputs in and outputs out, the messages, the synchronisation); a low quantile of
// all of them (not a round's median: on a loaded machine one disturbed round would wipe out every
// sample of its round) is removed from every sample, so the times compare the work and only
// noise above the cheapest calls remains in them. Removing less than the typical cost can only
// shrink a speedup towards 1, never inflate it.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "cudaagent/evaluation/call_verdicts.h"
#include "cudaagent/profile/report.h"
#include "cudaagent/profile/timing_stats.h"
#include "measurement.h"

namespace cudaagent {
namespace {

// Below this, a time is not told apart from the cost of a call: kept, never negative or zero.
constexpr double kResolutionFloorMs = 1e-4;

// The null model served by the candidate's runner (the owner sends it as "null" on that arm).
constexpr const char* kCandidateNull = "candidate_null";

// The 10th percentile: the cost of the cheapest calls, robust to a disturbed round.
double low_quantile(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 10];
}

std::vector<double> pooled(const RoundSamples& rounds) {
  std::vector<double> all;
  for (const auto& round : rounds) all.insert(all.end(), round.begin(), round.end());
  return all;
}

// Every sample less the cost of a call, never below the resolution floor.
RoundSamples net_of(const RoundSamples& rounds, double cost) {
  RoundSamples out;
  for (const auto& round : rounds) {
    std::vector<double> samples;
    for (double ms : round) samples.push_back(std::max(ms - cost, kResolutionFloorMs));
    out.push_back(std::move(samples));
  }
  return out;
}

// What is removed from the candidate's samples: the lower of the baseline runner's cost of a call
// and its own runner's. Two processes' calls differ by a few microseconds; removing the baseline's
// where the candidate's runner is the cheaper one takes that difference off the candidate's time
// and inflates a short kernel's speedup (an honest 3 us kernel read as 75 times eager, H100,
// 2026-12-07). The lower one can only be what the candidate's own runner costs or less: code in
// that process that slows its null calls finds the baseline's cost removed, never more.
double candidate_cost(const std::map<std::string, RoundSamples>& raw, double baseline_cost) {
  const auto own = raw.find(kCandidateNull);
  if (own == raw.end() || own->second.empty()) return baseline_cost;
  return std::min(baseline_cost, low_quantile(pooled(own->second)));
}

// Adaptive rounds look at the interval after every round: fewer resamples than the record's
// intervals, which is plenty to tell whether the width is near the target.
constexpr int kAdaptiveResamples = 2000;

}  // namespace

Result<std::optional<CallBatch>> Measurement::batch(const std::string& arm, const std::string& model,
                                                    const std::vector<std::uint64_t>& seeds, double timeout) {
  auto batch = evaluator_.calls(arm, model, seeds, timeout);
  if (!batch) return batch.status();
  CallBatch& b = batch.value();
  for (const auto& [name, ms] : b.owner_ms) evidence_.owner_ms[name] += ms;
  if (arm == "candidate") {
    for (const CallResult& call : b.calls) {
      evidence_.runner_calls.push_back({{call.start_ns, call.end_ns}, model == "candidate", warming_up_});
    }
  }
  if (arm != "candidate") {
    if (b.stopped) {
      if (model == "compile") return std::optional<CallBatch>{};  // the caller drops the arm
      return Status::error("the " + model + " baseline stopped: " + b.stopped->why + ": " + b.stopped->detail);
    }
    for (const CallResult& call : b.calls) {
      if (model != "null" && call.check && !call.check->match) {
        ++evidence_.baseline_mismatches;
        if (evidence_.baseline_notes.empty()) {
          evidence_.baseline_notes = model + " differs from the reference: " + call.check->reason;
        }
      }
    }
    return std::optional<CallBatch>(std::move(b));
  }
  if (model == "null" && !b.stopped) return std::optional<CallBatch>(std::move(b));  // no candidate code ran
  if (b.stopped) {
    // How the runner ended, when it did, is read by the caller from end_candidate(); the stop
    // alone says enough for the verdict here.
    const CallVerdict v = verdict_of_stop(*b.stopped, static_cast<std::size_t>(evidence_.checked_calls), std::nullopt);
    evidence_.outcome = {v.verdict, v.reason};
    evidence_.outcome_stop = b.stopped;
    return std::optional<CallBatch>{};
  }
  for (const CallResult& call : b.calls) {
    ++evidence_.checked_calls;
    if (!call.check) {
      evidence_.outcome = {Verdict::kFailRuntime, "timed call " + std::to_string(evidence_.checked_calls - 1) +
                                                      ": no output"};
      return std::optional<CallBatch>{};
    }
    if (!call.check->match) {
      const CallVerdict v = verdict_of_check(*call.check, "timed call " + std::to_string(evidence_.checked_calls - 1));
      evidence_.outcome = {v.verdict, v.reason};
      return std::optional<CallBatch>{};
    }
  }
  return std::optional<CallBatch>(std::move(b));
}

Status Measurement::warm_up(const std::string& arm, const std::string& model, std::vector<double>& last_ms) {
  warming_up_ = true;
  const Status status = warm_up_calls(arm, model, last_ms);
  warming_up_ = false;
  return status;
}

Status Measurement::warm_up_calls(const std::string& arm, const std::string& model, std::vector<double>& last_ms) {
  const auto started = std::chrono::steady_clock::now();
  // The first call of torch.compile compiles (seconds): it gets the load limit.
  double timeout = model == "compile" ? s_.load_timeout_seconds : s_.call_timeout_seconds;
  while (true) {
    auto done = batch(arm, model, evaluator_.fresh_seeds(static_cast<std::size_t>(s_.warmup_calls)), timeout);
    if (!done) return done.status();
    if (!done.value()) {
      if (model == "compile" && !evidence_.outcome) {
        evidence_.baselines.compile_status = "failed in warm-up";
        last_ms.clear();
      }
      return Status::ok();
    }
    last_ms.clear();
    for (const CallResult& call : done.value()->calls) last_ms.push_back(call.sample_ms());
    timeout = s_.call_timeout_seconds;
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    if (elapsed >= s_.warmup_ms) return Status::ok();
  }
}

std::optional<double> Measurement::interval_half_width(const std::map<std::string, RoundSamples>& raw,
                                                       bool fresh) const {
  const auto null = raw.find("null");
  const auto candidate = raw.find("candidate");
  if (null == raw.end() || candidate == raw.end()) return std::nullopt;
  const double cost = low_quantile(pooled(null->second));
  const double own_cost = candidate_cost(raw, cost);
  BootstrapSettings bootstrap = s_.bootstrap;
  bootstrap.resamples = kAdaptiveResamples;
  double low = 0, high = 0, middle = 0;
  const auto eager = raw.find("eager");
  if (fresh && eager != raw.end()) {
    auto speedup = estimate_speedup(net_of(eager->second, cost), net_of(candidate->second, own_cost), bootstrap);
    if (!speedup) return std::nullopt;
    low = speedup.value().ci_low, high = speedup.value().ci_high, middle = speedup.value().median;
  } else {
    auto times = summarize_times(net_of(candidate->second, own_cost), bootstrap);
    if (!times) return std::nullopt;
    low = times.value().ci_low_ms, high = times.value().ci_high_ms, middle = times.value().median_ms;
  }
  if (!(middle > 0) || !std::isfinite(high - low)) return std::nullopt;
  return (high - low) / 2 / middle;
}

// The rounds: every model on the same fresh seeds in a random order, each round; the host times of
// the calls not audited, per model and round, into `raw`. Adaptive rounds (target_ci) stop once the
// watched interval is tight enough or their time (rounds_seconds) is spent, looking only after the
// least number of rounds has run.
Status Measurement::rounds(const std::vector<std::string>& models, int calls, bool fresh,
                           std::map<std::string, RoundSamples>& raw) {
  const int most = std::max(s_.rounds, s_.max_rounds);
  const bool adaptive = (s_.target_ci > 0 || s_.rounds_seconds > 0) && most > s_.rounds;
  evidence_.rounds_stop = adaptive ? "max_rounds" : "fixed";
  const auto started = std::chrono::steady_clock::now();
  for (int round = 0; round < most; ++round) {
    const auto seeds = evaluator_.fresh_seeds(static_cast<std::size_t>(calls));
    std::vector<std::string> order = models;
    std::shuffle(order.begin(), order.end(), rng_);
    std::map<std::string, std::vector<double>> host;
    for (const std::string& model : order) {
      const bool candidate_arm = model == "candidate" || model == kCandidateNull;
      const std::string arm = candidate_arm ? "candidate" : "baseline";
      auto done = batch(arm, model == kCandidateNull ? "null" : model, seeds, s_.call_timeout_seconds);
      if (!done) return done.status();
      if (!done.value()) {
        if (evidence_.outcome) return Status::ok();
        return Status::error("the " + model + " baseline stopped during round " + std::to_string(round));
      }
      for (const CallResult& call : done.value()->calls) {
        if (call.audited) continue;  // checked, not timed
        host[model].push_back(call.sample_ms());
        if (model == kCandidateNull) evidence_.candidate_null_window_ms.push_back(call.host_ms);
      }
      for (const auto& [phase, ms] : done.value()->phases_ms) evidence_.call_phases_ms[model][phase].push_back(ms);
      if (host[model].empty()) host[model].push_back(done.value()->calls.back().sample_ms());
    }
    evidence_.call_cost_ms.push_back(median_of(host["null"]));
    evidence_.candidate_call_cost_ms.push_back(median_of(host[kCandidateNull]));
    for (auto& [model, times] : host) raw[model].push_back(std::move(times));
    evidence_.rounds_run = round + 1;
    if (adaptive && round + 1 >= s_.rounds) {
      evidence_.rounds_half_width = interval_half_width(raw, fresh);
      if (s_.target_ci > 0 && evidence_.rounds_half_width &&
          *evidence_.rounds_half_width <= s_.target_ci) {
        evidence_.rounds_stop = "target";
        break;
      }
      const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - started;
      if (s_.rounds_seconds > 0 && spent.count() >= s_.rounds_seconds) {
        evidence_.rounds_stop = "time";
        break;
      }
    }
  }
  return Status::ok();
}

Status Measurement::run(const std::optional<BaselineSamples>& cached, bool compile_available) {
  const bool fresh = !cached.has_value();
  std::vector<std::string> models = {"null", "candidate"};
  if (fresh) {
    models.push_back("eager");
    if (s_.compile_mode != "none" && compile_available) models.push_back("compile");
  }
  evidence_.baselines.compile_status =
      s_.compile_mode == "none" ? "not requested (--compile-mode none)"
      : !compile_available      ? "unavailable: torch " + evidence_.torch->torch_version + " has no torch.compile"
                                : "measured";
  // Warm-up: each arm until warmup_ms of calls; the slowest arm sets the calls per round. In the
  // reverse order, torch.compile first: its first call compiles, and its compile workers go on
  // using the CPUs after it; eager, sharing the baseline's process, warmed before it ran its first
  // rounds at up to twice its later time (a convolution, H100, 2026-12-05).
  double slowest_ms = 0;
  std::vector<double> null_ms;
  const std::vector<std::string> warm_order(models.rbegin(), models.rend());
  for (const std::string& model : warm_order) {
    const std::string arm = model == "candidate" ? "candidate" : "baseline";
    std::vector<double> last;
    if (Status status = warm_up(arm, model, last); !status) return status;
    if (evidence_.outcome) return Status::ok();
    if (model == "compile" && last.empty()) {
      models.erase(std::remove(models.begin(), models.end(), "compile"), models.end());
      continue;
    }
    if (model == "null") null_ms = last;
    slowest_ms = std::max(slowest_ms, median_of(last));
  }
  const double call_cost = median_of(null_ms);
  // A call's samples are per forward; a call lasts the task's forwards per call of them.
  const int calls = calls_per_round(std::max(slowest_ms - call_cost, kResolutionFloorMs) * evidence_.forwards_per_call,
                                    s_.round_ms,
                                    s_.min_calls, s_.max_calls, 0, 0);
  evidence_.baselines.calls_per_round = calls;

  // The null model in the candidate's own process too: reported, not removed (see evidence.cpp).
  models.push_back(kCandidateNull);
  std::map<std::string, RoundSamples> raw;
  if (Status status = rounds(models, calls, fresh, raw); !status || evidence_.outcome) return status;
  const double cost = low_quantile(pooled(raw["null"]));
  evidence_.call_cost_removed_ms = cost;
  evidence_.candidate_call_cost_low_ms = low_quantile(pooled(raw[kCandidateNull]));
  evidence_.candidate_window_cost_low_ms = low_quantile(evidence_.candidate_null_window_ms);
  evidence_.candidate_cost_removed_ms = candidate_cost(raw, cost);
  const auto net = [&](const std::string& model) { return net_of(raw[model], cost); };
  evidence_.candidate = net_of(raw["candidate"], evidence_.candidate_cost_removed_ms);
  evidence_.candidate_at_own_cost.clear();  // a recheck measures anew
  if (evidence_.candidate_call_cost_low_ms > evidence_.candidate_cost_removed_ms) {
    evidence_.candidate_at_own_cost = net_of(raw["candidate"], evidence_.candidate_call_cost_low_ms);
  }
  if (fresh) {
    evidence_.baselines.eager = net("eager");
    if (raw.count("compile")) evidence_.baselines.compile = net("compile");
  }
  if (fresh) {
    evidence_.baselines_sound = true;
  } else {
    const std::string status = evidence_.baselines.compile_status;
    evidence_.baselines = *cached;
    evidence_.baselines_cached = true;
    (void)status;
  }
  return Status::ok();
}

}  // namespace cudaagent
