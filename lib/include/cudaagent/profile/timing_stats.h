// Statistics of timed GPU work for cudaagent-profile: medians with 95% bootstrap intervals per
// timed quantity, and the paired speedup of a candidate over a baseline measured in alternating
// rounds. Key choice: the round is the unit of resampling, so drift shared by both arms of a round
// cancels in the speedup and between-round variation widens the intervals instead of hiding.
//
// Every function here is pure (no clock, no global state): the bootstrap draws from a PRNG seeded
// from BootstrapSettings::seed, so the same samples and seed always give the same interval, on any
// platform (std::mt19937_64 is fully specified; the bounded draw is our own, see timing_stats.cpp).
// All functions are thread-safe (they share nothing).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

// Samples of one timed quantity in milliseconds, one inner vector per measurement round, in the
// order the rounds ran. One round holding every sample is the unpaired, unclustered case.
using RoundSamples = std::vector<std::vector<double>>;

struct BootstrapSettings {
  // Resamples drawn per interval. 10,000 makes the 2.5% quantile stable to well under the
  // intervals' own width; fewer (~2,000) are fine for simulations.
  int resamples = 10000;
  // Seeds the PRNG; the same seed and samples give bit-identical intervals.
  std::uint64_t seed = 0x5eed'c0da'a9e7ULL;
};

// One timed quantity (eager, torch.compile or candidate): what profile.times_ms.<name> holds.
struct TimeSummary {
  double median_ms = 0;    // median of every sample, pooled over rounds
  double ci_low_ms = 0;    // 95% bootstrap interval of that median (see summarize_times)
  double ci_high_ms = 0;
  double mean_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  // Sample standard deviation / mean over every sample: includes drift between rounds.
  double cv = 0;
  // Pooled within-round standard deviation / mean: the noise of one block, without drift between
  // rounds (the "within-block CV"). Equals `cv` for one round; 0 when
  // every round holds a single sample (no within-round spread can be seen).
  double cv_within_round = 0;
  std::int64_t trials = 0;  // samples
  std::int64_t rounds = 0;
  // Samples above Q3 + 3 IQR ("far out", Tukey). Counted, never removed: the median already
  // resists them, and dropping slow samples would hide a candidate that is sometimes slow. A large
  // fraction says the block was disturbed (another process, clocks) and is worth re-measuring.
  std::int64_t outliers = 0;
};

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double median_of(std::vector<double> values);

// Median, 95% interval, CV, counts of one timed quantity.
// Interval: with two or more rounds, a cluster bootstrap (whole rounds resampled with replacement,
// median of the pooled samples of the drawn rounds), so drift or a disturbed round widens it as it
// should; with one round, the ordinary bootstrap of the median over samples. Percentiles are
// "expanded" for small counts (see estimate_speedup).
// Errors (Status): no rounds, an empty round, fewer than 2 samples in all, a sample that is NaN,
// infinite, zero or negative, more than 10,000,000 samples, resamples outside [100, 1,000,000].
Result<TimeSummary> summarize_times(const RoundSamples& rounds, const BootstrapSettings& settings);
// The one-round form: `samples` are independent repetitions of one block.
Result<TimeSummary> summarize_times(std::span<const double> samples,
                                    const BootstrapSettings& settings);

// Speedup of a candidate over one baseline: what profile.speedup.<baseline> holds.
struct SpeedupSummary {
  double median = 0;   // baseline time / candidate time; > 1 means the candidate is faster
  double ci_low = 0;   // 95% interval, paired by round
  double ci_high = 0;
  std::int64_t rounds = 0;
  // Per round: median baseline sample / median candidate sample, in round order (kept for audit).
  std::vector<double> round_ratios;
};

// Paired speedup of `candidate` over `baseline`, both measured in the same R alternating rounds
// (round r of one arm ran next to round r of the other).
//
// Method, and why: each round gives one ratio q_r = median(baseline_r) / median(candidate_r).
// A slowly drifting clock or a warm/cold phase multiplies both medians of a round alike, so it
// cancels in q_r; alternating the order within rounds (A-B, B-A, ...) cancels drift inside a round
// on average. The point estimate is the median of the q_r (robust to one disturbed round;). The interval resamples whole rounds with replacement —
// rounds are the independent units, samples inside a round are not — and takes the median of the
// log-ratios of each resample. Plain percentile intervals under-cover with few units (about 93%
// for 20 rounds in our simulations), so the percentiles are widened as in Hesterberg's "expanded
// percentile" interval: the tail probability is the one a t-interval with R-1 degrees of freedom,
// scaled by sqrt(R/(R-1)), would use. Resampling samples inside rounds as well (a two-stage
// bootstrap) counts within-round noise twice and gave ~100% coverage; resampling only inside rounds
// ignores between-round variation. With an even R the median is the geometric mean of the middle
// two ratios. Coverage measured on simulated rounds (1,000 experiments each, 3% noise, 30% drift,
// 5% outliers): 0.96-0.97 for 20-100 rounds, 0.99 for 8-10 rounds (conservative: a median of few
// rounds has a coarse bootstrap distribution). With R <= 5 the interval is about
// [min q_r, max q_r]: measure at least 10 rounds for a useful one (see bootstrap_tail_probability).
//
// Errors (Status, naming the arm): fewer than 2 rounds, different round counts, an empty round, a
// sample that is NaN, infinite, zero or negative; the limits of summarize_times.
Result<SpeedupSummary> estimate_speedup(const RoundSamples& baseline, const RoundSamples& candidate,
                                        const BootstrapSettings& settings);

// The two-sided tail probability the intervals use for `units` resampled units (rounds, or
// samples of one round): Hesterberg's expanded percentile, 2 (1 - Phi(sqrt(n/(n-1)) t_{0.975,n-1})).
// 0 for n < 2; 0.0019 for 5 units, 0.0171 for 10, 0.0318 for 20, 0.0461 for 100, tending to 0.05.
// The interval is [the tail/2 quantile, the 1 - tail/2 quantile] of the bootstrap medians.
double bootstrap_tail_probability(std::int64_t units);

// Whether a speedup interval shows a difference larger than `tolerance` (a fraction; 0.01 = 1%).
// kFaster when ci_low > 1 + tolerance, kSlower when ci_high < 1 / (1 + tolerance), otherwise
// kNoSignificantDifference (the interval contains 1 or reaches into the indifference band). This is
// the A-A test's decision: two identical arms should say kNoSignificantDifference. With tolerance 0
// a correct 95% interval says so in 95% of experiments, so only ~74% of batches of 20 A-A repeats
// would have >= 19 passes; a small tolerance (default 1%, below any margin the reward uses) lets an
// honest setup pass the ">= 95% of 20" bar while a real 5% difference is still found.
// Non-finite bounds give kNoSignificantDifference (nothing shown).
enum class SpeedupComparison { kFaster, kSlower, kNoSignificantDifference };
inline constexpr double kDefaultIndifference = 0.01;
SpeedupComparison compare_speedup(const SpeedupSummary& speedup,
                                  double tolerance = kDefaultIndifference);
// "faster", "slower", "no_significant_difference".
std::string_view speedup_comparison_name(SpeedupComparison comparison);

// Kernel-time classes for reporting noise by duration (a 5 µs kernel cannot be timed as steadily
// as a 5 ms one). Half-open: [0, 10 µs), [10 µs, 100 µs), [100 µs, 1 ms), [1 ms, inf).
enum class TimeClass { kUnder10us, k10usTo100us, k100usTo1ms, kFrom1ms };
inline constexpr int kTimeClassCount = 4;
// The class of a time in ms. Errors: NaN, infinite, zero or negative times.
Result<TimeClass> classify_time_ms(double time_ms);
// "<10us", "10us-100us", "100us-1ms", ">=1ms".
std::string_view time_class_name(TimeClass time_class);

// One measured kernel for the CV-by-class table: its median time and its CV.
struct TimedCv {
  double median_ms = 0;
  double cv = 0;
};
struct ClassCv {
  TimeClass time_class = TimeClass::kUnder10us;
  std::int64_t count = 0;
  double median_cv = 0;  // NaN when count == 0 (written as null)
  double max_cv = 0;     // NaN when count == 0
};
// Median and worst CV per time class, indexed by TimeClass. Errors: a bad median_ms (as
// classify_time_ms) or a CV that is NaN, infinite or negative.
Result<std::array<ClassCv, kTimeClassCount>> summarize_cv_by_class(std::span<const TimedCv> kernels);

}  // namespace cudaagent
