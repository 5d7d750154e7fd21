// EpisodeEvaluator over the project's own trusted code: the extension build for compile,
// cudaagent::Verifier for verify, cudaagent::Profiler for profile, and the reward stage's decision
// for the final score, so an episode's verify, profile and reward values are what cudaagent-verify,
// cudaagent-profile and cudaagent-reward write for the same workspace. An evaluation service would
// replace this class, not the episode.
//
// Key design choice: evaluation slots, each a thread of its own that owns one Verifier and one
// Profiler for its whole life and runs one evaluation at a time; episodes queue their evaluations
// for the next free slot, so GPU work is queued per device (one slot per GPU a process sees — run
// one rollout process per GPU). Each of them holds an evaluation session (evaluation/evaluator.h),
// which stays open across the candidates of one task: the agent's edit, verify, profile loop pays
// for the task's owner and the baselines once, not per call. The thread matters: every child the
// project spawns gets PR_SET_PDEATHSIG, which the kernel fires when the *thread* that spawned it
// ends, so session workers started from an episode's short-lived threads died with the episode, in
// the middle of another episode's evaluation (seen with 64 episodes at once). Builds for compile have
// slots of their own, since they need no device and start no workers. Results are kept by task and
// workspace content, so the final score reuses the agent's last verify and profile of an unchanged
// workspace instead of measuring it again.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/profile/profile.h"
#include "cudaagent/reward/reward.h"
#include "cudaagent/rollout/evaluator.h"
#include "cudaagent/sandbox/torch_env.h"
#include "cudaagent/verify/verify.h"

namespace cudaagent::rollout {

struct LocalEvaluatorSettings {
  VerifySettings verify;    // device, python, cache, sandbox (installed by the caller)
  ProfileSettings profile;  // the same device, python, cache and sandbox
  RewardSettings reward;
  int slots = 1;              // evaluations at once (one per GPU)
  int build_slots = 2;        // compile requests at once
  bool profile_final = true;  // the final score profiles a PASS (off: verify and reward only)
};

// A counting lock: at most N holders; acquire() blocks for a free index.
class SlotPool {
 public:
  explicit SlotPool(int count) : free_(static_cast<std::size_t>(std::max(count, 1)), true) {}
  int acquire();
  void release(int index);

 private:
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<bool> free_;
};

class LocalEvaluator final : public EpisodeEvaluator {
 public:
  // Finds torch for the device (a Status when there is none). Verifiers and profilers start
  // lazily, at a slot's first evaluation.
  static Result<std::unique_ptr<LocalEvaluator>> create(LocalEvaluatorSettings settings);
  ~LocalEvaluator() override;

  EvalReply compile(const EvalRequest& request) override;
  EvalReply verify(const EvalRequest& request) override;
  EvalReply profile(const EvalRequest& request) override;
  FinalScore final_score(const EvalRequest& request) override;

  const TorchEnv& torch() const { return torch_; }

 private:
  struct Slot;
  struct Outcome {
    std::string verdict, reason, json;
  };
  explicit LocalEvaluator(LocalEvaluatorSettings settings, TorchEnv torch);
  // Runs `work` on the next free slot's thread and waits for it; exceptions come back here.
  void on_slot(std::function<void(Slot&)> work);
  void slot_thread(std::size_t index);
  // The cache key of a workspace's content for a task, or a Status when it cannot be read.
  Result<std::string> content_key(const EvalRequest& request, std::string* files_json);
  Outcome run_verify(const EvalRequest& request, const std::string& key);
  Outcome run_profile(const EvalRequest& request, const std::string& key);
  std::optional<Outcome> cached(std::map<std::string, Outcome>& cache, const std::string& key);
  void remember(std::map<std::string, Outcome>& cache, std::deque<std::string>& order, const std::string& key,
                const Outcome& outcome);

  LocalEvaluatorSettings settings_;
  TorchEnv torch_;
  std::string binding_cpp_, binding_registry_h_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::mutex queue_mutex_;
  std::condition_variable queue_ready_;
  std::deque<std::packaged_task<void(Slot&)>*> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // one per slot
  SlotPool build_pool_;
  std::mutex cache_mutex_;
  std::map<std::string, Outcome> verified_, profiled_;
  std::deque<std::string> verified_order_, profiled_order_;
};

// The text `python3 -m utils.verification` prints for a "verify" value: the verdict and reason,
// then what explains a failure (compiler errors, policy findings, failed checks, the candidate's
// stderr). Exposed for tests.
std::string verify_report(const std::string& verify_json);

}  // namespace cudaagent::rollout
