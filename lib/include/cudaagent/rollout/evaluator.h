// The trusted evaluation an episode asks for. Inside the sandbox the agent runs the workspace's
// shims (`bash utils/compile.sh`, `python3 -m utils.verification`, `python3 -m utils.profiling`);
// they only forward a one-word request over a Unix socket (eval_server.h), and the rollout process
// answers it through this interface, outside the sandbox. The end of an episode asks for the final
// verify, profile and reward here too.
//
// Key design choice: the episode knows only this interface, so the implementation — today's
// Verifier/Profiler/reward (local_evaluator.h), or an evaluation service that replaces them — can
// change without touching the loop. Implementations must be thread-safe: every running episode
// calls them from its own threads, and they queue the work per device themselves.
#pragma once

#include <optional>
#include <string>

namespace cudaagent::rollout {

// The task and the workspace being evaluated. The reference always comes from the task (pristine),
// never from the workspace, whose copy of model.py the agent could have changed.
struct EvalRequest {
  std::string task_id;
  std::string model_py;   // the pristine task
  std::string workspace;  // absolute host path of the episode's workspace
  std::string episode_id;
};

// What the agent's command prints and its exit code.
struct EvalReply {
  std::string text;
  int exit_code = 0;
  std::string verdict;  // for the trajectory's account: "PASS", "FAIL_COMPILE", "compiled", ...
};

// The episode's final judgement: the values of the record's verify, profile and reward keys.
struct FinalScore {
  std::string verify_json;   // always set
  std::string profile_json;  // empty when not profiled (not PASS)
  std::string reward_json;   // empty when no reward could be given (INFRA_ERROR)
  std::string verdict;       // the deciding verdict (profile's when it overrides)
  std::optional<double> reward;
  std::string candidate_files_json;  // {"model_new.py": text, "kernels/x.cu": text, ...}
};

class EpisodeEvaluator {
 public:
  virtual ~EpisodeEvaluator() = default;
  // Builds the workspace's extension: the compiler's diagnostics, exit code 0 when it built.
  virtual EvalReply compile(const EvalRequest& request) = 0;
  // Verifies the workspace against the pristine task: the verdict and what went wrong.
  virtual EvalReply verify(const EvalRequest& request) = 0;
  // Times the workspace against eager (and torch.compile): times and speedups.
  virtual EvalReply profile(const EvalRequest& request) = 0;
  // Verify, then profile a PASS, then the reward, of the workspace as it stands.
  virtual FinalScore final_score(const EvalRequest& request) = 0;
};

}  // namespace cudaagent::rollout
