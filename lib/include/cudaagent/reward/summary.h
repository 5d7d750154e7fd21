// Results people can read (cudaagent-reward --summary): from scored records, the pass rate,
// fast_p at several speedup thresholds and the geometric-mean speedup over eager and over
// torch.compile (KernelBench's definitions), the reward histogram, the same per task level, and
// SVG plots of them. Pure bookkeeping over what the reward key already holds; nothing is re-read
// from profiles or re-decided.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

// What the summary takes from one record.
struct ScoredRecord {
  std::string level;                     // task.meta.level as text; "" when the record has none
  std::string verdict;                   // reward.verdict
  double reward = 0;                     // reward.value
  std::string form;                      // reward.form
  std::optional<double> speedup_eager;   // reward.inputs.eager.speedup (PASS with a profile)
  std::optional<double> speedup_compile; // reward.inputs.compile.speedup (when compile was timed)
};

// Reads a scored record: a Status (why it cannot be counted) for an error record or a record
// without a reward key.
Result<ScoredRecord> read_scored_record(simdjson::dom::object record);

// The thresholds p of fast_p: KernelBench's (0 is the pass rate).
inline const std::vector<double>& fast_p_thresholds() {
  static const std::vector<double> kThresholds{0.0, 0.5, 0.8, 1.0, 1.5, 2.0};
  return kThresholds;
}

// The figures of one group of records (all of them, or one level).
struct SummaryGroup {
  std::uint64_t records = 0;
  std::map<std::string, std::uint64_t> verdicts;
  std::uint64_t passed = 0;
  std::vector<double> eager, compile;  // speedups of the PASS records that have them
  std::map<double, std::uint64_t> rewards;
  double reward_sum = 0;

  void add(const ScoredRecord& record);
  double pass_rate() const;
  // fast_p: the share of all records that are PASS and whose speedup over the baseline is above
  // p (KernelBench's metric; a PASS without a measured speedup counts as not fast).
  double fast_p(const std::vector<double>& speedups, double p) const;
  // The geometric mean of the speedups; nullopt when there are none.
  static std::optional<double> geomean(const std::vector<double>& speedups);
};

class ResultSummary {
 public:
  void add(const ScoredRecord& record);
  void add_unscored(const std::string& reason);

  // The report for people: counts, pass rate, speedup table, reward histogram, per-level table,
  // and a legend of what each number means.
  std::string text() const;
  // The same figures as one JSON object (one line).
  std::string json() const;
  // Writes rewards.svg, fast_p.svg and, when the records have levels, levels.svg into `dir`
  // (created when missing). Returns the files written.
  Result<std::vector<std::string>> write_plots(const std::string& dir) const;

  const SummaryGroup& all() const { return all_; }
  const std::map<std::string, SummaryGroup>& levels() const { return levels_; }

 private:
  SummaryGroup all_;
  std::map<std::string, SummaryGroup> levels_;
  std::uint64_t unscored_ = 0;
  std::map<std::string, std::uint64_t> unscored_reasons_;
  std::string form_;
};

}  // namespace cudaagent
