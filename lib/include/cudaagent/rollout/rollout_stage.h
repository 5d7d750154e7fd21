// cudaagent-rollout as a library: options, flags, and the run — task records (or KernelBench-style
// model.py files) in, one trajectory record per episode out, episodes run --jobs at a time.
//
// Key design choice: records are written as episodes finish, in the order they finish (a killed
// run keeps every finished episode), and with --db each is made durable before it is written; a
// resumed run writes the stored records of finished episodes again and runs only the others.
#pragma once

#include <string>

#include "cudaagent/records/cli.h"
#include "cudaagent/rollout/episode.h"
#include "cudaagent/rollout/local_evaluator.h"
#include "cudaagent/sandbox/setup.h"

namespace cudaagent::rollout {

struct RolloutOptions {
  CommonOptions common;
  EpisodeSettings episode;
  LocalEvaluatorSettings evaluator;
  std::string endpoint;           // --endpoint
  std::string api_key_env;        // --api-key-env
  std::string policy = "server";  // "server" or "replay:FILE"
  std::string device = "cuda";
  int episodes_per_task = 1;
  std::string token_encoding = "base64";
  bool no_token_ids = false;
  std::string prompt_mode = "messages";  // --prompt-mode: messages or ids
  std::string extra_body;  // --extra-body: a JSON object merged into every request
  double request_timeout = 600;
  int retries = 3;
  double backoff = 1.0;
  std::string skill_path;  // --skill: default share/skill/SKILL.md
  SandboxFlags sandbox;
  std::string candidate_user = "auto";  // --candidate-user, as cudaagent-verify and -profile take it
  std::string python, cache_dir, arch;
};

void add_rollout_flags(CLI::App& app, RolloutOptions& options);

// Runs every episode of this shard. Exit semantics as the other stages: kCompleted when every
// episode ran (failed episodes are records), a Status when the run could not work at all (no
// torch, no sandbox, unreadable input, output or store failing).
Result<StageEnd> run_rollout(RolloutOptions& options, Session& session);

}  // namespace cudaagent::rollout
