// cudaagent-reward as a library: options, flags and the per-record stage, so the tool's main is
// a few lines and tests can drive the stage in-process.
#pragma once

#include <CLI/CLI.hpp>

#include "cudaagent/records/cli.h"
#include "cudaagent/reward/reward.h"

namespace cudaagent {

struct RewardOptions {
  CommonOptions common;
  std::string form = "milestone";  // parsed into settings.form after the command line is read
  RewardSettings settings;
};

// Adds the reward flags (--form, --margin, --baseline, --fail-value) and the common ones.
void add_reward_flags(CLI::App& app, RewardOptions& options);

// Scores every record of the inputs; with --db each reward is committed to the store before the
// record is written downstream, and a record scored before (same inputs, same settings) takes the
// stored reward. Returns as run_record_stage does.
Result<StageEnd> run_reward(RewardOptions& options, Session& session);

}  // namespace cudaagent
