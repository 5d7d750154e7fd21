// The episode workers of cudaagent-rollout: --jobs threads take the planned episodes in order, run
// each, and write its record as it ends (to the output and the store, or an error record), with a
// progress line per episode. Private to lib/rollout (rollout_stage.cpp plans, this runs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cudaagent/base/session.h"
#include "cudaagent/base/status.h"
#include "cudaagent/records/record_sink.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/rollout/episode.h"
#include "cudaagent/rollout/evaluator.h"
#include "cudaagent/rollout/policy.h"

namespace cudaagent::rollout {

struct PlannedEpisode {
  EpisodeTask task;
  std::uint64_t line = 0;  // the task's input line, for error records
};

struct EpisodeRun {
  const EpisodeSettings* settings = nullptr;
  // A fresh policy for one episode (by its id: a server policy names the episode in its warnings).
  std::function<std::unique_ptr<Policy>(const std::string& episode_id)> make_policy;
  EpisodeEvaluator* evaluator = nullptr;
  RecordSink* output = nullptr;
  RecordSink* errors = nullptr;  // may be the output
  ResultStore* store = nullptr;  // optional: finished records are put here too
  int jobs = 1;
};

struct EpisodeRunEnd {
  std::size_t done = 0, failed = 0;
  bool pipe_closed = false;
  Status failure = Status::ok();  // the first write that failed
};

// Runs `todo` on run.jobs threads until all are done, a write fails or the session's stop signal
// is set (an episode cut short by a stop is not written: a resumed run does it again).
EpisodeRunEnd run_episodes(const std::vector<PlannedEpisode>& todo, const EpisodeRun& run, Session& session);

}  // namespace cudaagent::rollout
