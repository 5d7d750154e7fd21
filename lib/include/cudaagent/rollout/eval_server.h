// The trusted end of the workspace's evaluation shims: a Unix socket bound read-only into the
// episode's sandbox, served by one thread of the rollout process. A shim connects, writes one word
// ("compile", "verify" or "profile") and a newline, and reads back "exit <code>\n" followed by the
// text to print. Nothing the agent sends is more than that word: the evaluator reads the workspace
// itself, from outside, and the reference comes from the task.
//
// One request at a time per episode; a request that arrives while one runs waits its turn. The
// server counts the time it spends, so the Bash tool can stop a command's clock while the command
// waits for an evaluation (a profile can take longer than a command's timeout).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/rollout/evaluator.h"

namespace cudaagent::rollout {

struct EvalCall {
  std::string op;  // "compile", "verify", "profile", or what an unknown request said
  int turn = 0;    // the episode's turn when it was asked
  double seconds = 0;
  int exit_code = 0;
  std::string verdict;
};

class EvalServer {
 public:
  // Binds `socket_path` (its folder must exist and be private to this run) and starts serving.
  // `max_calls` bounds the evaluations of the episode (later requests are told so); `evaluator`
  // must outlive the server. A Status when the socket cannot be made.
  static Result<std::unique_ptr<EvalServer>> start(const std::string& socket_path,
                                                   EpisodeEvaluator& evaluator, EvalRequest request,
                                                   int max_calls);
  ~EvalServer();  // stops the thread (waiting for a call in progress) and removes the socket
  EvalServer(const EvalServer&) = delete;
  EvalServer& operator=(const EvalServer&) = delete;

  // Seconds spent answering requests so far, the one in progress included. Thread-safe.
  double busy_seconds() const;
  // The calls answered so far, in order. Thread-safe.
  std::vector<EvalCall> calls() const;
  // The turn the next calls belong to (for the record). Thread-safe.
  void set_turn(int turn) { turn_.store(turn); }
  const std::string& socket_path() const { return socket_path_; }

 private:
  EvalServer(std::string socket_path, EpisodeEvaluator& evaluator, EvalRequest request, int max_calls,
             int listen_fd, int wake_fd);
  void serve();
  void answer(int client);

  std::string socket_path_;
  EpisodeEvaluator& evaluator_;
  EvalRequest request_;
  int max_calls_;
  int evaluations_ = 0;  // compile/verify/profile requests so far (the serving thread's)
  int listen_fd_;
  int wake_fd_;  // an eventfd: written to stop the thread
  std::atomic<int> turn_{0};
  std::atomic<long long> busy_ns_{0};
  std::atomic<long long> call_started_ns_{0};  // steady-clock ns of the call in progress, 0 if none
  mutable std::mutex mutex_;
  std::vector<EvalCall> calls_;
  std::thread thread_;
};

}  // namespace cudaagent::rollout
