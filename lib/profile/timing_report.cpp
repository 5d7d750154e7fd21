// Builds and writes the timing part of a profile. The JSON shape is the contract with
// lib/reward/reward.cpp, which gates on speedup.<baseline>.ci95[0]; tests read it back through
// read_reward_inputs.
#include "cudaagent/profile/timing_report.h"

#include <algorithm>

namespace cudaagent {
namespace {

// A seed per quantity from the profile's seed (the SplitMix64 finaliser), so each interval has its
// own stream and adding an arm changes no other arm's interval.
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + stream * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

BootstrapSettings stream(const BootstrapSettings& settings, std::uint64_t id) {
  BootstrapSettings derived = settings;
  derived.seed = derive_seed(settings.seed, id);
  return derived;
}

void write_interval(JsonWriter& json, double low, double high) {
  json.key("ci95").begin_array().value(low).value(high).end_array();
}

}  // namespace

Result<TimingReport> build_timing_report(const TimingSamples& samples, const BootstrapSettings& settings) {
  auto eager = summarize_times(samples.eager, stream(settings, 1));
  if (!eager) return eager.status().with_context("eager");
  auto candidate = summarize_times(samples.candidate, stream(settings, 2));
  if (!candidate) return candidate.status().with_context("candidate");
  auto over_eager = estimate_speedup(samples.eager, samples.candidate, stream(settings, 3));
  if (!over_eager) return over_eager.status().with_context("speedup over eager");
  TimingReport report{eager.value(), std::nullopt, candidate.value(), std::move(over_eager).value(),
                      std::nullopt};
  if (!samples.compile.empty()) {
    auto compile = summarize_times(samples.compile, stream(settings, 4));
    if (!compile) return compile.status().with_context("compile");
    auto over_compile = estimate_speedup(samples.compile, samples.candidate, stream(settings, 5));
    if (!over_compile) return over_compile.status().with_context("speedup over compile");
    report.compile = compile.value();
    report.speedup_compile = std::move(over_compile).value();
  }
  return report;
}

void reach_upper_ends(TimingReport& report, const TimingReport& at_other_cost) {
  report.speedup_eager.ci_high = std::max(report.speedup_eager.ci_high, at_other_cost.speedup_eager.ci_high);
  if (report.speedup_compile && at_other_cost.speedup_compile) {
    report.speedup_compile->ci_high =
        std::max(report.speedup_compile->ci_high, at_other_cost.speedup_compile->ci_high);
  }
}

void write_rounds(JsonWriter& json, const RoundSamples& rounds) {
  json.begin_array();
  for (const auto& round : rounds) {
    json.begin_array();
    for (double x : round) json.value(x);
    json.end_array();
  }
  json.end_array();
}

void write_list(JsonWriter& json, const std::vector<double>& values) {
  json.begin_array();
  for (double x : values) json.value(x);
  json.end_array();
}

void write_time_summary(JsonWriter& json, const TimeSummary& summary) {
  json.begin_object().field("median", summary.median_ms);
  write_interval(json, summary.ci_low_ms, summary.ci_high_ms);
  json.field("cv", summary.cv)
      .field("cv_within_round", summary.cv_within_round)
      .field("trials", summary.trials)
      .field("rounds", summary.rounds)
      .field("outliers", summary.outliers)
      .field("mean", summary.mean_ms)
      .field("min", summary.min_ms)
      .field("max", summary.max_ms)
      .end_object();
}

void write_speedup_summary(JsonWriter& json, const SpeedupSummary& speedup) {
  json.begin_object().field("median", speedup.median);
  write_interval(json, speedup.ci_low, speedup.ci_high);
  json.field("rounds", speedup.rounds).key("round_ratios").begin_array();
  for (double ratio : speedup.round_ratios) json.value(ratio);
  json.end_array().end_object();
}

void write_timing_fields(JsonWriter& json, const TimingReport& report) {
  json.key("times_ms").begin_object().key("eager");
  write_time_summary(json, report.eager);
  json.key("compile");
  if (report.compile) {
    write_time_summary(json, *report.compile);
  } else {
    json.null();
  }
  json.key("candidate");
  write_time_summary(json, report.candidate);
  json.end_object();

  json.key("speedup").begin_object().key("eager");
  write_speedup_summary(json, report.speedup_eager);
  json.key("compile");
  if (report.speedup_compile) {
    write_speedup_summary(json, *report.speedup_compile);
  } else {
    json.null();
  }
  json.end_object();
}

std::string timing_json(const TimingReport& report) {
  std::string out;
  JsonWriter json(out);
  json.begin_object();
  write_timing_fields(json, report);
  json.end_object();
  return out;
}

}  // namespace cudaagent
