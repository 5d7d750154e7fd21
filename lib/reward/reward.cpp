// Reward decisions. A speedup counts only when its lower confidence bound clears the margin, so a
// noisy measurement never earns a tier it has not shown; a profile verdict (FLAG_HACK) overrides
// verify's PASS, so a flagged submission earns what an honest failure earns and no more.
#include "cudaagent/reward/reward.h"

#include <cmath>
#include <cstdint>

#include "cudaagent/base/json_writer.h"

namespace cudaagent {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%g%%", fraction * 100);
  return text;
}

std::string times(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3gx", x);
  return text;
}

// A positive finite number at `path` of `parent`, or a reason.
Result<double> positive_number(object parent, std::string_view key, const std::string& path) {
  element value;
  if (parent[key].get(value)) return Status::error(path + " is missing");
  if (value.is_null()) return Status::error(path + " is null (not a finite number)");
  double number = 0;
  if (value.get_double().get(number)) return Status::error(path + " is not a number");
  if (!std::isfinite(number) || number <= 0) return Status::error(path + " must be positive");
  return number;
}

// An interval [low, high] of positive numbers with low <= high, or a reason.
Result<std::pair<double, double>> interval(element value, const std::string& path) {
  simdjson::dom::array pair;
  if (value.get_array().get(pair) || pair.size() != 2) {
    return Status::error(path + " must be [low, high]");
  }
  double low = 0, high = 0;
  if (pair.at(0).get_double().get(low) || pair.at(1).get_double().get(high) ||
      !std::isfinite(low) || !std::isfinite(high) || low <= 0 || high < low) {
    return Status::error(path + " must be [low, high] with 0 < low <= high");
  }
  return std::pair{low, high};
}

// profile.speedup.<baseline> = {"median": s, "ci95": [lo, hi]}.
Result<std::optional<SpeedupEstimate>> from_speedup(object profile, std::string_view baseline) {
  object speedups, entry;
  if (profile["speedup"].get_object().get(speedups)) return std::optional<SpeedupEstimate>{};
  element value;
  if (speedups[baseline].get(value)) return std::optional<SpeedupEstimate>{};
  const std::string path = "profile.speedup." + std::string(baseline);
  if (value.is_null()) return std::optional<SpeedupEstimate>{};
  if (value.get_object().get(entry)) return Status::error(path + " must be an object");
  auto point = positive_number(entry, "median", path + ".median");
  if (!point) return point.status();
  SpeedupEstimate estimate{point.value(), point.value(), false, "speedup", 0};
  element ci;
  if (!entry["ci95"].get(ci) && !ci.is_null()) {
    auto bounds = interval(ci, path + ".ci95");
    if (!bounds) return bounds.status();
    estimate.lower = bounds.value().first;
    estimate.has_interval = true;
  }
  estimate.saved_lower = 1.0 - 1.0 / estimate.lower;
  return std::optional<SpeedupEstimate>{estimate};
}

// One timing entry, profile.times_ms.<name> = {"median": t, "ci95": [lo, hi]}.
struct Timing {
  double median = 0;
  std::optional<std::pair<double, double>> ci;
};

Result<std::optional<Timing>> timing(object times, std::string_view name, bool required) {
  const std::string path = "profile.times_ms." + std::string(name);
  element value;
  if (times[name].get(value) || value.is_null()) {
    if (required) return Status::error(path + " is missing");
    return std::optional<Timing>{};
  }
  object entry;
  if (value.get_object().get(entry)) return Status::error(path + " must be an object");
  auto median = positive_number(entry, "median", path + ".median");
  if (!median) return median.status();
  Timing result{median.value(), std::nullopt};
  element ci;
  if (!entry["ci95"].get(ci) && !ci.is_null()) {
    auto bounds = interval(ci, path + ".ci95");
    if (!bounds) return bounds.status();
    result.ci = bounds.value();
  }
  return std::optional<Timing>{result};
}

// The speedup over `baseline`, preferring the profile's own (paired) speedup interval and
// falling back to a conservative ratio of the time intervals: slowest-plausible candidate over
// fastest-plausible baseline.
Result<std::optional<SpeedupEstimate>> speedup_over(object profile, std::string_view baseline,
                                                    bool required) {
  auto direct = from_speedup(profile, baseline);
  if (!direct || direct.value()) return direct;
  object times;
  if (profile["times_ms"].get_object().get(times)) {
    return Status::error("profile has neither speedup." + std::string(baseline) +
                         " nor times_ms");
  }
  auto candidate = timing(times, "candidate", true);
  if (!candidate) return candidate.status();
  auto base = timing(times, baseline, required);
  if (!base) return base.status();
  if (!base.value()) return std::optional<SpeedupEstimate>{};
  const Timing& b = *base.value();
  const Timing& c = *candidate.value();
  SpeedupEstimate estimate{b.median / c.median, b.median / c.median, false, "times",
                           (b.median - c.median) / b.median};
  if (b.ci && c.ci) {
    estimate.lower = b.ci->first / c.ci->second;
    estimate.saved_lower = (b.ci->first - c.ci->second) / b.ci->first;
    estimate.has_interval = true;
  }
  return std::optional<SpeedupEstimate>{estimate};
}

void write_estimate(JsonWriter& json, std::string_view name,
                    const std::optional<SpeedupEstimate>& estimate) {
  json.key(name);
  if (!estimate) {
    json.null();
    return;
  }
  json.begin_object()
      .field("source", estimate->source)
      .field("speedup", estimate->point)
      .field("speedup_lower", estimate->lower)
      .field("has_interval", estimate->has_interval)
      .end_object();
}

// The forwards per call the profile used (checks.forwards_per_call, else settings'), 1 when it
// says neither (older records, hand-made ones).
Result<int> forwards_per_call(object profile) {
  for (std::string_view section : {"checks", "settings"}) {
    object part;
    element value;
    if (profile[section].get_object().get(part) || part["forwards_per_call"].get(value)) continue;
    std::int64_t forwards = 0;
    if (value.get_int64().get(forwards) || forwards < 1) {
      return Status::error("profile." + std::string(section) + ".forwards_per_call must be a positive integer");
    }
    return static_cast<int>(forwards);
  }
  return 1;
}

}  // namespace

std::string_view reward_form_name(RewardForm form) {
  switch (form) {
    case RewardForm::kMilestone: return "milestone";
    case RewardForm::kSpeedup: return "speedup";
    case RewardForm::kLogSpeedup: return "log-speedup";
  }
  return "unknown";
}

std::optional<RewardForm> parse_reward_form(std::string_view name) {
  for (auto form : {RewardForm::kMilestone, RewardForm::kSpeedup, RewardForm::kLogSpeedup}) {
    if (reward_form_name(form) == name) return form;
  }
  return std::nullopt;
}

bool clears_margin(const SpeedupEstimate& speedup, double margin) {
  return speedup.saved_lower > margin;
}

Result<RewardInputs> read_reward_inputs(object record) {
  RewardInputs inputs;
  object verify;
  if (record["verify"].get_object().get(verify)) {
    return Status::error("record has no 'verify' object");
  }
  std::string_view name;
  if (verify["verdict"].get_string().get(name)) {
    return Status::error("verify.verdict is missing or not a string");
  }
  auto verdict = parse_verdict(name);
  if (!verdict) return Status::error("verify.verdict '" + std::string(name) + "' is not a verdict");
  inputs.verdict = *verdict;
  inputs.verdict_source = "verify";

  object profile;
  const bool has_profile = !record["profile"].get_object().get(profile);
  if (has_profile) {
    std::string_view override_name;
    if (!profile["verdict"].get_string().get(override_name)) {
      auto overriding = parse_verdict(override_name);
      if (!overriding) {
        return Status::error("profile.verdict '" + std::string(override_name) + "' is not a verdict");
      }
      // The profile can only take a PASS away (FLAG_HACK, FAIL_INCORRECT on timed outputs...).
      if (inputs.verdict == Verdict::kPass || *overriding == Verdict::kInfraError) {
        inputs.verdict = *overriding;
        inputs.verdict_source = "profile";
      }
    }
  }
  if (inputs.verdict != Verdict::kPass) return inputs;
  if (!has_profile) return Status::error("PASS record has no 'profile' object to time it");
  auto forwards = forwards_per_call(profile);
  if (!forwards) return forwards.status();
  inputs.forwards_per_call = forwards.value();
  auto eager = speedup_over(profile, "eager", true);
  if (!eager) return eager.status();
  inputs.eager = eager.value();
  auto compile = speedup_over(profile, "compile", false);
  if (!compile) return compile.status();
  inputs.compile = compile.value();
  return inputs;
}

Result<RewardDecision> decide_reward(const RewardInputs& inputs, const RewardSettings& settings) {
  if (inputs.verdict == Verdict::kInfraError) {
    return Status::error("verdict INFRA_ERROR (from " + std::string(inputs.verdict_source) +
                         "): the evaluation failed for reasons outside the candidate; retry it, "
                         "it is never scored");
  }
  RewardDecision decision;
  const double fail_value = settings.form == RewardForm::kMilestone ? -1.0 : settings.fail_value;
  if (inputs.verdict != Verdict::kPass) {
    decision.value = fail_value;
    decision.reason = std::string(verdict_name(inputs.verdict)) + " (from " +
                      std::string(inputs.verdict_source) + ")";
    return decision;
  }
  if (inputs.forwards_per_call > 1 && !settings.trusted_code) {
    return Status::error("profile timed " + std::to_string(inputs.forwards_per_call) +
                         " forwards per call: every slot's inputs exist from the call's start, so a "
                         "candidate's first forward can compute the later ones, and the speedup is "
                         "not scored; profile with --forwards-per-call 1, or pass --trusted-code "
                         "for code you trust");
  }
  decision.faster_than_eager = inputs.eager && clears_margin(*inputs.eager, settings.margin);
  decision.faster_than_compile = inputs.compile && clears_margin(*inputs.compile, settings.margin);
  const std::string margin = percent(settings.margin);
  if (settings.form == RewardForm::kMilestone) {
    if (decision.faster_than_eager && decision.faster_than_compile) {
      decision.value = 3;
      decision.reason = "PASS, faster than eager and torch.compile by more than " + margin;
    } else if (decision.faster_than_eager) {
      decision.value = 2;
      decision.reason = "PASS, faster than eager by more than " + margin + " but not than " +
                        (inputs.compile ? "torch.compile" : "torch.compile (not measured)");
    } else {
      decision.value = 1;
      decision.reason = "PASS, not faster than eager by more than " + margin;
    }
    decision.reason += " (speedup lower bounds: eager " + times(inputs.eager->lower) +
                       (inputs.compile ? ", compile " + times(inputs.compile->lower) : "") + ")";
    return decision;
  }
  const auto& chosen = settings.baseline == "eager" ? inputs.eager : inputs.compile;
  if (!chosen) {
    return Status::error("PASS record has no " + settings.baseline +
                         " timing for the speedup reward");
  }
  const double raw = settings.form == RewardForm::kSpeedup ? chosen->point : std::log(chosen->point);
  decision.value = std::max(raw, fail_value);
  decision.reason = "PASS, speedup " + times(chosen->point) + " over " + settings.baseline;
  return decision;
}

std::string reward_json(const RewardInputs& inputs, const RewardDecision& decision,
                        const RewardSettings& settings) {
  std::string out;
  JsonWriter json(out);
  json.begin_object()
      .field("form", reward_form_name(settings.form))
      .field("value", decision.value)
      .field("verdict", verdict_name(inputs.verdict))
      .field("verdict_source", inputs.verdict_source)
      .field("margin", settings.margin);
  if (settings.form != RewardForm::kMilestone) {
    json.field("baseline", std::string_view(settings.baseline)).field("fail_value", settings.fail_value);
  }
  json.field("faster_than_eager", decision.faster_than_eager)
      .field("faster_than_compile", decision.faster_than_compile);
  json.key("inputs").begin_object();
  write_estimate(json, "eager", inputs.eager);
  write_estimate(json, "compile", inputs.compile);
  json.end_object();
  json.field("reason", std::string_view(decision.reason));
  json.end_object();
  return out;
}

}  // namespace cudaagent
