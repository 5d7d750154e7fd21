// The reward: from a record's verify and profile keys to one number for the trainer, with the
// inputs and the reason stated. Pure functions, table-tested; the tool around them is
// tools/reward. Default form: CUDA Agent's milestone reward.
#pragma once

#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>

#include "cudaagent/base/status.h"
#include "cudaagent/records/verdict.h"

namespace cudaagent {

enum class RewardForm {
  kMilestone,    // -1 unless PASS; 3 faster than eager and compile; 2 faster than eager; else 1
  kSpeedup,      // PASS: speedup over the chosen baseline; otherwise the fail value
  kLogSpeedup,   // PASS: ln(speedup) over the chosen baseline; otherwise the fail value
};

struct RewardSettings {
  RewardForm form = RewardForm::kMilestone;
  // "Faster by more than the margin" means the time saved, (t_base - t_cand) / t_base, exceeds it.
  double margin = 0.05;
  // Baseline for the speedup forms: "compile" or "eager".
  std::string baseline = "compile";
  // Reward of every non-PASS verdict in the speedup forms (milestone: always -1). A PASS never
  // earns less than this.
  double fail_value = 0.0;
  // Score profiles timed with more than one forward per call. Off by default: every slot's inputs
  // exist from such a call's start, so a candidate's first forward can compute the later ones and
  // look several times faster than it is (measured on an H200). For code the user trusts.
  bool trusted_code = false;
};

// A speedup over one baseline as the decision uses it.
struct SpeedupEstimate {
  double point = 0;    // baseline time / candidate time
  double lower = 0;    // the 95% lower bound when the profile has intervals, else `point`
  bool has_interval = false;
  std::string_view source;  // "speedup" (profile.speedup.*) or "times" (profile.times_ms.*)
  // Time saved at the lower bound, (t_base - t_cand) / t_base. Computed from the times themselves
  // when they are the source, so the margin boundary is exact (100 ms vs 95 ms saves exactly 5%).
  double saved_lower = 0;
};

struct RewardInputs {
  Verdict verdict = Verdict::kInfraError;
  std::string_view verdict_source;          // "verify" or "profile" (a profile verdict overrides)
  std::optional<SpeedupEstimate> eager;     // absent: verdict is not PASS
  std::optional<SpeedupEstimate> compile;   // absent for PASS: compile baseline not measured
  int forwards_per_call = 1;                // profile.checks.forwards_per_call (used), else 1
};

// Reads the verdict and speedups from a record. A Status (the reason for an error record) when a
// field the decision needs is missing, of the wrong type, null (non-finite), or not positive, or
// when the verdict is not in the vocabulary.
Result<RewardInputs> read_reward_inputs(simdjson::dom::object record);

struct RewardDecision {
  double value = -1;
  bool faster_than_eager = false;
  bool faster_than_compile = false;
  std::string reason;
};

// Decides the reward. INFRA_ERROR is never scored: a Status telling the caller to retry.
Result<RewardDecision> decide_reward(const RewardInputs& inputs, const RewardSettings& settings);

// The value of the record's "reward" key: form, value, verdict, margin, decision and inputs.
std::string reward_json(const RewardInputs& inputs, const RewardDecision& decision,
                        const RewardSettings& settings);

std::string_view reward_form_name(RewardForm form);
std::optional<RewardForm> parse_reward_form(std::string_view name);

// Whether the estimate's time saved (at its lower bound) exceeds the margin.
bool clears_margin(const SpeedupEstimate& speedup, double margin);

}  // namespace cudaagent
