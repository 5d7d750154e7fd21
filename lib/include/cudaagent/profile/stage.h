// cudaagent-profile as a library: options, flags, and the two input modes — workspace directories
// given on the command line (with --task), or JSONL records from cudaagent-verify, of which only
// those whose verify.verdict is PASS are timed (the others pass through unchanged).
#pragma once

#include "cudaagent/profile/profile.h"
#include "cudaagent/records/cli.h"
#include "cudaagent/sandbox/setup.h"

namespace cudaagent {

struct ProfileOptions {
  CommonOptions common;
  ProfileSettings settings;
  std::string task;           // --task: the pristine model.py for workspace mode
  SandboxFlags sandbox;
  bool brief = false;         // --brief: a few plain lines per workspace instead of records
  std::string candidate_user = "auto";  // --candidate-user
  bool remeasure = false;     // --remeasure: time candidates even when the store has their profile
  bool no_python_policy = false;  // skip model_new.py's static check (testing the timing beneath)
};

void add_profile_flags(CLI::App& app, ProfileOptions& options);

// Profiles every input. Workspace mode when the inputs are directories, JSONL otherwise (mixing
// them is a usage error). Exit semantics as run_record_stage.
Result<StageEnd> run_profile(ProfileOptions& options, Session& session);

}  // namespace cudaagent
