// The episode workers: one output lock serialises the records, the counters and the progress line;
// episodes themselves run unlocked, --jobs at a time.
#include "episode_runner.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "cudaagent/records/record.h"

namespace cudaagent::rollout {
namespace {

std::string duration_text(double seconds) {
  const long s = static_cast<long>(seconds);
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  return std::to_string(s / 3600) + "h" + std::to_string((s % 3600) / 60) + "m";
}

class Runner {
 public:
  Runner(const std::vector<PlannedEpisode>& todo, const EpisodeRun& run, Session& session)
      : todo_(todo), run_(run), session_(session), started_(session.clock.now_seconds()) {}

  EpisodeRunEnd run_all() {
    std::vector<std::thread> threads;
    const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(std::max(run_.jobs, 1)),
                                                    std::max<std::size_t>(todo_.size(), 1));
    for (std::size_t i = 0; i < count; ++i) threads.emplace_back([this] { work(); });
    for (std::thread& thread : threads) thread.join();
    return end_;
  }

 private:
  // Takes the next episode until none is left, a write failed or a stop was asked for.
  void work() {
    for (;;) {
      if (session_.stop_signal.load() != 0) return;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!end_.failure || end_.pipe_closed) return;
      }
      const std::size_t index = next_.fetch_add(1);
      if (index >= todo_.size()) return;
      const PlannedEpisode& p = todo_[index];
      EpisodeResult result = run_one(p);
      std::lock_guard<std::mutex> lock(mutex_);
      if (!result.finished && result.error.empty()) return;  // stopped: not written, done again on resume
      ++end_.done;
      Status written = result.error.empty() ? write_record(p, result) : write_error(p, result);
      if (!written) {
        if (run_.output->pipe_closed()) end_.pipe_closed = true;
        if (end_.failure) end_.failure = written;
      }
    }
  }

  EpisodeResult run_one(const PlannedEpisode& p) {
    std::unique_ptr<Policy> policy = run_.make_policy(p.task.episode_id);
    EpisodeSettings settings = *run_.settings;
    if (settings.sampling.seed) {
      // Each episode samples with its own seed, derived from the run's and the episode's id.
      settings.sampling.seed =
          (*settings.sampling.seed + std::stoll(p.task.episode_id.substr(0, 12), nullptr, 16)) & 0x7fffffff;
    }
    try {  // simdjson and the standard library may throw; one episode must not end the run
      return run_episode(p.task, settings, *policy, *run_.evaluator, session_.stop_signal, session_.log);
    } catch (const std::exception& error) {
      EpisodeResult failed;
      failed.error = std::string("internal error: ") + error.what();
      return failed;
    }
  }

  Status write_error(const PlannedEpisode& p, const EpisodeResult& result) {
    ++end_.failed;
    std::string line;
    append_error_record(line, {"rollout", p.task.source, p.line}, result.error, {}, p.task.episode_id);
    Status written = run_.errors->write(line);
    if (written) written = run_.errors->flush();
    session_.log.warn("episode " + p.task.episode_id.substr(0, 12) + " could not run: " + result.error);
    return written;
  }

  Status write_record(const PlannedEpisode& p, const EpisodeResult& result) {
    Status written = Status::ok();
    if (run_.store != nullptr) {
      const StoredResult row{p.task.episode_id, "rollout", p.task.episode_id,
                             result.record.substr(0, result.record.size() - 1)};
      if (auto put = run_.store->put_batch(std::span<const StoredResult>(&row, 1)); !put) written = put.status();
    }
    if (written) written = run_.output->write(result.record);
    if (written) written = run_.output->flush();
    if (result.reward) {
      reward_sum_ += *result.reward;
      ++rewarded_;
    }
    log_progress(p, result);
    return written;
  }

  void log_progress(const PlannedEpisode& p, const EpisodeResult& result) {
    const double elapsed = session_.clock.now_seconds() - started_;
    // Episodes finish at the rate seen so far, whatever the parallelism.
    const double eta =
        elapsed / static_cast<double>(end_.done) * static_cast<double>(todo_.size() - end_.done);
    char mean[32];
    std::snprintf(mean, sizeof mean, "%.2f", rewarded_ ? reward_sum_ / static_cast<double>(rewarded_) : 0.0);
    session_.log.info("episode " + std::to_string(end_.done) + "/" + std::to_string(todo_.size()) + " (task " +
                      p.task.task_id.substr(0, 12) + ", sample " + std::to_string(p.task.sample) +
                      "): " + result.verdict + ", reward " +
                      (result.reward ? std::to_string(*result.reward).substr(0, 5) : std::string("none")) +
                      ", " + std::to_string(result.turns) + " turns, " + result.finish_reason + ", " +
                      duration_text(result.seconds) + "; mean reward " + mean + "; ETA " + duration_text(eta));
  }

  const std::vector<PlannedEpisode>& todo_;
  const EpisodeRun& run_;
  Session& session_;
  const double started_;
  std::mutex mutex_;  // guards everything below and the sinks
  std::atomic<std::size_t> next_{0};
  EpisodeRunEnd end_;
  double reward_sum_ = 0;
  std::size_t rewarded_ = 0;
};

}  // namespace

EpisodeRunEnd run_episodes(const std::vector<PlannedEpisode>& todo, const EpisodeRun& run, Session& session) {
  return Runner(todo, run, session).run_all();
}

}  // namespace cudaagent::rollout
