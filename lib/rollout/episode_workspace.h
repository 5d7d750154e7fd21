// Private: an episode's folder — the workspace in CUDA Agent's layout (pristine model.py, the
// protected glue, empty kernels/, the utils/ shims, SKILL.md), the evaluation socket's folder and
// the shell's scratch — made fresh for each episode.
#pragma once

#include <string>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent::rollout::detail {

struct EpisodeFolders {
  std::string root;       // <work_dir>/cudaagent-episode-XXXXXX
  std::string workspace;  // root/workspace
  std::string eval_dir;   // root/eval (the socket; bound read-only into the sandbox)
  std::string socket;     // eval_dir/sock
  std::string scratch;    // root/shell (command files, output logs; never in the sandbox)
};

// Relative names the tools refuse to change (a trailing '/' protects a folder).
inline const std::vector<std::string>& protected_names() {
  static const std::vector<std::string> kNames = {"model.py", "binding.cpp", "binding_registry.h", "SKILL.md",
                                                  "utils/"};
  return kNames;
}

// Makes the folders and writes the workspace: `model_py` and the files from `share`
// (workspace/binding*, rollout/utils/*) read-only, SKILL.md from `skill_text`, utils/eval_socket
// naming the socket.
Result<EpisodeFolders> make_episode_folders(const std::string& work_dir, const std::string& model_py,
                                            const std::string& skill_text, const std::string& share);

}  // namespace cudaagent::rollout::detail
