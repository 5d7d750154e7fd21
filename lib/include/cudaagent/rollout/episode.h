// One episode: a fresh workspace for a task, the ReAct loop (model reply -> tool calls -> results
// -> ...) until the model answers without a tool call or a limit is hit, then the final verify,
// profile and reward of the workspace, and one trajectory record.
//
// Key design choice: the loop owns nothing shared. The policy is the episode's own, the evaluator
// is thread-safe, and the episode's workspace, shell, evaluation socket and scratch files live
// under one private folder that is removed when the episode ends.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/base/session.h"
#include "cudaagent/llm/chat.h"
#include "cudaagent/rollout/evaluator.h"
#include "cudaagent/rollout/policy.h"
#include "cudaagent/sandbox/process.h"
#include "cudaagent/sandbox/runner.h"

namespace cudaagent::rollout {

struct EpisodeSettings {
  std::string model;               // sent to the server and recorded
  llm::SamplingSettings sampling;  // max_tokens is lowered near the context limit
  llm::TokenOptions tokens;
  std::string tool_protocol = "native";  // "native" (tools in the request) or "text" (<tool_call>)
  std::string extra_members;             // extra request body members (ChatRequest::extra_members)
  bool token_prompts = false;  // later turns go as ids (ServerPolicy); results as tool messages
  int max_turns = 150;
  std::int64_t max_context_tokens = 131072;
  double max_seconds = 4 * 3600.0;  // wall time of the loop (the final score is not counted)
  int max_evaluations = 200;        // compile/verify/profile requests of one episode
  bool base64_tokens = true;        // token arrays as base64 (else JSON arrays)
  std::string work_dir = "/tmp";    // where each episode's private folder is made
  bool keep_workspaces = false;
  // The agent's shell.
  SandboxWrapper sandbox;  // empty: the shell runs unsandboxed (allowed by the user)
  std::string sandbox_summary = "none";
  std::vector<std::string> shell_readable;  // extra read-only paths (torch, toolkit)
  std::string shell_path = "/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin";
  double command_timeout_seconds = 120;
  double max_command_timeout_seconds = 600;
  ProcessLimits shell_limits;
  std::string skill_text;   // SKILL.md, shown in the system prompt and the workspace
  std::string policy_name;  // "server" or "replay:FILE", for the id and the record
  std::string endpoint;     // for the record
};

struct EpisodeTask {
  std::string task_id;
  std::string model_py;
  std::string record_json;  // the input record ({"id", "task", ...}) passed through; "" for a .py
  std::string source;       // input file, for messages
  int sample = 0;           // which episode of this task (--episodes-per-task)
  std::string episode_id;
};

struct EpisodeResult {
  bool finished = false;  // false: stopped by a signal before the end (not written, not stored)
  std::string record;     // the trajectory record, '\n'-terminated, when finished
  std::string finish_reason;
  std::string verdict;
  std::optional<double> reward;
  int turns = 0;
  double seconds = 0;
  std::string error;  // why the episode could not even start (INFRA: no workspace, ...)
};

// Runs one episode. Never throws; a failure to set the episode up is `error` (and no record).
EpisodeResult run_episode(const EpisodeTask& task, const EpisodeSettings& settings, Policy& policy,
                          EpisodeEvaluator& evaluator, const std::atomic<int>& stop, Logger& log);

// The episode id: lowercase hex SHA-256 of the task's id and source, the sample index, the model,
// the policy and the sampling seed — the same episode run again has the same id (--db resume).
std::string episode_id(const std::string& task_id, const std::string& model_py, int sample,
                       const EpisodeSettings& settings);

// The system prompt (fixed for every episode, so a server's prefix cache serves it) and the first
// user message (names the workspace and the task).
std::string system_prompt(const EpisodeSettings& settings);
std::string task_prompt(const std::string& workspace, const std::string& task_id);

}  // namespace cudaagent::rollout
