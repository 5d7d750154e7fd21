// Bootstrap statistics of timed samples. One resampling engine serves all three uses (samples,
// rounds of samples, per-round ratios): values sorted once, each labelled with the unit that is
// resampled, and the median of a resample found by walking the sorted values with the draw counts
// as weights — O(n) per resample, no copy and no sort inside the loop.
#include "cudaagent/profile/timing_stats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>

namespace cudaagent {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kMinResamples = 100;
constexpr int kMaxResamples = 1'000'000;
constexpr std::size_t kMaxSamples = 10'000'000;  // resampling units are 32-bit indices

// Uniform indices in [0, n) from a seeded std::mt19937_64, each 64-bit output split into two
// 32-bit halves (the engine is most of a resample's cost). Lemire's multiply-shift with rejection:
// exact, no modulo bias, and the same on every platform, unlike std::uniform_int_distribution whose
// algorithm each standard library chooses.
class IndexDraw {
 public:
  explicit IndexDraw(std::uint64_t seed) : engine_(seed) {}

  std::uint32_t below(std::uint32_t n) {
    std::uint64_t product = std::uint64_t{next_half()} * n;
    auto low = static_cast<std::uint32_t>(product);
    if (low < n) {
      const std::uint32_t threshold = (0u - n) % n;
      while (low < threshold) {
        product = std::uint64_t{next_half()} * n;
        low = static_cast<std::uint32_t>(product);
      }
    }
    return static_cast<std::uint32_t>(product >> 32);
  }

 private:
  std::uint32_t next_half() {
    if (have_high_) {
      have_high_ = false;
      return static_cast<std::uint32_t>(bits_ >> 32);
    }
    bits_ = engine_();
    have_high_ = true;
    return static_cast<std::uint32_t>(bits_);
  }

  std::mt19937_64 engine_;
  std::uint64_t bits_ = 0;
  bool have_high_ = false;
};

// Linear interpolation between order statistics (Hyndman-Fan type 7, R's default) of ascending
// `sorted`, p in [0, 1].
double quantile_sorted(std::span<const double> sorted, double p) {
  const double position = p * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

// The same quantile of `values` by selection instead of a sort (the bootstrap's 10,000 medians
// would otherwise be sorted for two numbers). Reorders `values`; elements before `from` must all
// be <= every element from it on (true after an earlier call for a lower p), and the quantile's
// rank must lie at or after `from`.
double quantile_unsorted(std::vector<double>& values, std::vector<double>::iterator from, double p) {
  const double position = p * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::ptrdiff_t>(std::floor(position));
  const auto nth = values.begin() + below;
  std::nth_element(from, nth, values.end());
  if (nth + 1 == values.end()) return *nth;
  const double next = *std::min_element(nth + 1, values.end());
  return *nth + (position - static_cast<double>(below)) * (next - *nth);
}

// Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (standard tables).
constexpr std::array<double, 30> kT975 = {
    12.7062047, 4.3026527, 3.1824463, 2.7764451, 2.5705818, 2.4469119, 2.3646243, 2.3060041,
    2.2621572,  2.2281389, 2.2009852, 2.1788128, 2.1603687, 2.1447867, 2.1314495, 2.1199053,
    2.1098156,  2.1009220, 2.0930241, 2.0859634, 2.0796138, 2.0738731, 2.0686576, 2.0638986,
    2.0595386,  2.0555294, 2.0518305, 2.0484071, 2.0452296, 2.0422725};
constexpr double kZ975 = 1.959963984540054;

// t quantile; beyond the table the Cornish-Fisher expansion in 1/df (Abramowitz & Stegun 26.7.5),
// accurate to ~1e-6 there.
double t975(std::int64_t df) {
  if (df <= static_cast<std::int64_t>(kT975.size())) return kT975[static_cast<std::size_t>(df - 1)];
  const double z = kZ975, z2 = z * z, v = static_cast<double>(df);
  const double g1 = (z2 + 1) * z / 4;
  const double g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
  const double g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
  const double g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
  return z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v);
}

// Values sorted ascending, each labelled with the resampling unit it belongs to.
struct Pool {
  std::vector<double> values;
  std::vector<std::uint32_t> unit_of;
  std::vector<std::uint32_t> unit_size;
};

Pool make_pool(const RoundSamples& rounds, bool per_sample) {
  std::vector<std::pair<double, std::uint32_t>> labelled;
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    for (double x : rounds[r]) {
      const auto unit = per_sample ? labelled.size() : r;
      labelled.emplace_back(x, static_cast<std::uint32_t>(unit));
    }
  }
  Pool pool;
  pool.unit_size.assign(per_sample ? labelled.size() : rounds.size(), 0);
  std::sort(labelled.begin(), labelled.end());
  for (const auto& [value, unit] : labelled) {
    // A sample that is its own unit is relabelled by its rank: resampling is unchanged (units are
    // exchangeable) and the median walk then reads the weights in order.
    const auto label = per_sample ? static_cast<std::uint32_t>(pool.values.size()) : unit;
    pool.values.push_back(value);
    pool.unit_of.push_back(label);
    ++pool.unit_size[label];
  }
  return pool;
}

// Median of the pool where unit u counts weight[u] times, total weight `total` > 0.
double weighted_median(const Pool& pool, std::span<const std::uint32_t> weight, std::uint64_t total) {
  const std::uint64_t low_rank = (total - 1) / 2, high_rank = total / 2;
  std::uint64_t seen = 0;
  double low = 0;
  bool have_low = false;
  for (std::size_t i = 0; i < pool.values.size(); ++i) {
    seen += weight[pool.unit_of[i]];
    if (!have_low && seen > low_rank) {
      low = pool.values[i];
      have_low = true;
    }
    if (seen > high_rank) return (low + pool.values[i]) / 2;
  }
  return kNaN;  // not reached: the weights sum to `total`
}

// The expanded-percentile interval of the median of the pool, resampling whole units.
std::pair<double, double> bootstrap_median_interval(const Pool& pool, const BootstrapSettings& settings) {
  const std::size_t units = pool.unit_size.size();
  IndexDraw draw(settings.seed);
  std::vector<std::uint32_t> weight(units);
  std::vector<double> medians;
  medians.reserve(static_cast<std::size_t>(settings.resamples));
  // With units of one size (samples, or rounds of equal length) every resample has the same total.
  const bool same_size = std::all_of(pool.unit_size.begin(), pool.unit_size.end(),
                                     [&](std::uint32_t size) { return size == pool.unit_size[0]; });
  for (int b = 0; b < settings.resamples; ++b) {
    std::fill(weight.begin(), weight.end(), 0);
    std::uint64_t total = same_size ? std::uint64_t{pool.unit_size[0]} * units : 0;
    for (std::size_t k = 0; k < units; ++k) {
      const auto unit = draw.below(static_cast<std::uint32_t>(units));
      ++weight[unit];
      if (!same_size) total += pool.unit_size[unit];
    }
    medians.push_back(weighted_median(pool, weight, total));
  }
  const double tail = bootstrap_tail_probability(static_cast<std::int64_t>(units));
  const double low = quantile_unsorted(medians, medians.begin(), tail / 2);
  // Everything at or above the low quantile's rank now lies after it: select the high one there.
  const auto low_rank = static_cast<std::ptrdiff_t>(std::floor(tail / 2 * static_cast<double>(medians.size() - 1)));
  return {low, quantile_unsorted(medians, medians.begin() + low_rank, 1 - tail / 2)};
}

Status check_settings(const BootstrapSettings& settings) {
  if (settings.resamples < kMinResamples || settings.resamples > kMaxResamples) {
    return Status::error("bootstrap resamples must be between " + std::to_string(kMinResamples) +
                         " and " + std::to_string(kMaxResamples) + ", got " +
                         std::to_string(settings.resamples));
  }
  return Status::ok();
}

Status check_rounds(const RoundSamples& rounds, std::string_view what) {
  const std::string name(what);
  if (rounds.empty()) return Status::error(name + ": no rounds");
  std::size_t total = 0;
  for (const auto& round : rounds) total += round.size();
  if (total > kMaxSamples) {
    return Status::error(name + ": " + std::to_string(total) + " samples, more than the " +
                         std::to_string(kMaxSamples) + " an interval is computed from");
  }
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    if (rounds[r].empty()) return Status::error(name + ": round " + std::to_string(r) + " is empty");
    for (std::size_t i = 0; i < rounds[r].size(); ++i) {
      const double x = rounds[r][i];
      if (!std::isfinite(x) || x <= 0) {
        return Status::error(name + ": sample " + std::to_string(i) + " of round " +
                             std::to_string(r) + " is " + (std::isfinite(x) ? "not positive" : "not finite") +
                             " (a time must be a positive number of milliseconds)");
      }
    }
  }
  return Status::ok();
}

}  // namespace

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return quantile_sorted(values, 0.5);
}

double bootstrap_tail_probability(std::int64_t units) {
  if (units < 2) return 0;
  const double n = static_cast<double>(units);
  const double t = std::sqrt(n / (n - 1)) * t975(units - 1);
  return std::erfc(t / std::sqrt(2.0));  // 2 (1 - Phi(t))
}

Result<TimeSummary> summarize_times(const RoundSamples& rounds, const BootstrapSettings& settings) {
  if (auto status = check_settings(settings); !status) return status;
  if (auto status = check_rounds(rounds, "times"); !status) return status;
  const Pool pool = make_pool(rounds, rounds.size() < 2);
  const auto n = static_cast<std::int64_t>(pool.values.size());
  if (n < 2) return Status::error("times: at least 2 samples are needed for an interval, got 1");

  TimeSummary summary;
  summary.trials = n;
  summary.rounds = static_cast<std::int64_t>(rounds.size());
  summary.median_ms = quantile_sorted(pool.values, 0.5);
  summary.min_ms = pool.values.front();
  summary.max_ms = pool.values.back();
  summary.mean_ms = std::accumulate(pool.values.begin(), pool.values.end(), 0.0) / static_cast<double>(n);
  double squares = 0, within_squares = 0;
  std::int64_t within_df = 0;
  for (double x : pool.values) squares += (x - summary.mean_ms) * (x - summary.mean_ms);
  for (const auto& round : rounds) {
    const double mean = std::accumulate(round.begin(), round.end(), 0.0) / static_cast<double>(round.size());
    for (double x : round) within_squares += (x - mean) * (x - mean);
    within_df += static_cast<std::int64_t>(round.size()) - 1;
  }
  summary.cv = std::sqrt(squares / static_cast<double>(n - 1)) / summary.mean_ms;
  summary.cv_within_round =
      within_df > 0 ? std::sqrt(within_squares / static_cast<double>(within_df)) / summary.mean_ms : 0;
  const double q1 = quantile_sorted(pool.values, 0.25), q3 = quantile_sorted(pool.values, 0.75);
  const double fence = q3 + 3 * (q3 - q1);
  summary.outliers = std::count_if(pool.values.begin(), pool.values.end(),
                                   [fence](double x) { return x > fence; });
  std::tie(summary.ci_low_ms, summary.ci_high_ms) = bootstrap_median_interval(pool, settings);
  return summary;
}

Result<TimeSummary> summarize_times(std::span<const double> samples, const BootstrapSettings& settings) {
  return summarize_times(RoundSamples{std::vector<double>(samples.begin(), samples.end())}, settings);
}

Result<SpeedupSummary> estimate_speedup(const RoundSamples& baseline, const RoundSamples& candidate,
                                        const BootstrapSettings& settings) {
  if (auto status = check_settings(settings); !status) return status;
  if (auto status = check_rounds(baseline, "baseline"); !status) return status;
  if (auto status = check_rounds(candidate, "candidate"); !status) return status;
  if (baseline.size() != candidate.size()) {
    return Status::error("speedup: baseline has " + std::to_string(baseline.size()) +
                         " rounds but candidate has " + std::to_string(candidate.size()) +
                         " (rounds must be paired)");
  }
  if (baseline.size() < 2) return Status::error("speedup: at least 2 paired rounds are needed, got 1");

  SpeedupSummary speedup;
  speedup.rounds = static_cast<std::int64_t>(baseline.size());
  RoundSamples log_ratios;  // one unit per round, one value per unit
  for (std::size_t r = 0; r < baseline.size(); ++r) {
    const double ratio = median_of(baseline[r]) / median_of(candidate[r]);
    speedup.round_ratios.push_back(ratio);
    log_ratios.push_back({std::log(ratio)});
  }
  const Pool pool = make_pool(log_ratios, false);
  speedup.median = std::exp(quantile_sorted(pool.values, 0.5));
  const auto [low, high] = bootstrap_median_interval(pool, settings);
  speedup.ci_low = std::exp(low);
  speedup.ci_high = std::exp(high);
  return speedup;
}

SpeedupComparison compare_speedup(const SpeedupSummary& speedup, double tolerance) {
  if (!(tolerance > 0)) tolerance = 0;
  if (speedup.ci_low > 1 + tolerance) return SpeedupComparison::kFaster;
  if (speedup.ci_high < 1 / (1 + tolerance)) return SpeedupComparison::kSlower;
  return SpeedupComparison::kNoSignificantDifference;
}

std::string_view speedup_comparison_name(SpeedupComparison comparison) {
  switch (comparison) {
    case SpeedupComparison::kFaster: return "faster";
    case SpeedupComparison::kSlower: return "slower";
    case SpeedupComparison::kNoSignificantDifference: return "no_significant_difference";
  }
  return "unknown";
}

Result<TimeClass> classify_time_ms(double time_ms) {
  if (!std::isfinite(time_ms) || time_ms <= 0) {
    return Status::error("time class: a time must be a positive finite number of milliseconds");
  }
  if (time_ms < 0.01) return TimeClass::kUnder10us;
  if (time_ms < 0.1) return TimeClass::k10usTo100us;
  if (time_ms < 1) return TimeClass::k100usTo1ms;
  return TimeClass::kFrom1ms;
}

std::string_view time_class_name(TimeClass time_class) {
  switch (time_class) {
    case TimeClass::kUnder10us: return "<10us";
    case TimeClass::k10usTo100us: return "10us-100us";
    case TimeClass::k100usTo1ms: return "100us-1ms";
    case TimeClass::kFrom1ms: return ">=1ms";
  }
  return "unknown";
}

Result<std::array<ClassCv, kTimeClassCount>> summarize_cv_by_class(std::span<const TimedCv> kernels) {
  std::array<std::vector<double>, kTimeClassCount> cvs;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    auto time_class = classify_time_ms(kernels[i].median_ms);
    if (!time_class) return time_class.status().with_context("kernel " + std::to_string(i));
    if (!std::isfinite(kernels[i].cv) || kernels[i].cv < 0) {
      return Status::error("kernel " + std::to_string(i) + ": cv must be a finite number >= 0");
    }
    cvs[static_cast<std::size_t>(time_class.value())].push_back(kernels[i].cv);
  }
  std::array<ClassCv, kTimeClassCount> table;
  for (std::size_t c = 0; c < table.size(); ++c) {
    table[c].time_class = static_cast<TimeClass>(c);
    table[c].count = static_cast<std::int64_t>(cvs[c].size());
    table[c].median_cv = cvs[c].empty() ? kNaN : median_of(cvs[c]);
    table[c].max_cv = cvs[c].empty() ? kNaN : *std::max_element(cvs[c].begin(), cvs[c].end());
  }
  return table;
}

}  // namespace cudaagent
