// cudaagent-reward as a library: options, flags and the per-record stage, so the tool's main is
// a few lines and tests can drive the stage in-process.
#pragma once

#include <string>
#include <vector>

#include "cudaagent/records/cli.h"
#include "cudaagent/reward/reward.h"

namespace cudaagent {

struct RewardOptions {
  CommonOptions common;
  std::string form = "milestone";  // parsed into settings.form after the command line is read
  RewardSettings settings;
  // Other modes: reports over scored records instead of scoring them ...
  bool summary = false;            // --summary: the text report on stdout (or -o)
  bool summary_json = false;       // --summary-json: the same figures as one JSON object
  std::string plots;               // --plots DIR: SVG plots of the summary
  std::string export_kernelbench;  // --export-kernelbench DIR: KernelBench's result files
  // ... and the merge of stores: every result of each STORE into --db.
  std::vector<std::string> merge;  // --merge STORE...
};

// Adds the reward flags (--form, --margin, --baseline, --fail-value, the report modes and
// --merge) and the common ones.
void add_reward_flags(CLI::App& app, RewardOptions& options);

// Scores every record of the inputs; with --db each reward is committed to the store before the
// record is written downstream, and a record scored before (same inputs, same settings) takes the
// stored reward. Returns as run_record_stage does. In a report mode (--summary, --summary-json,
// --plots, --export-kernelbench) it reads scored records and writes the report instead; with
// --merge it copies the stores into --db and reads no records.
Result<StageEnd> run_reward(RewardOptions& options, Session& session);

}  // namespace cudaagent
