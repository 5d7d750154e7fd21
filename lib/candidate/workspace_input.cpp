// Workspace arguments: their normal path and id, the pristine task they are judged against, and
// the rule that inputs are either all workspaces or all JSONL files.
#include "cudaagent/candidate/workspace_input.h"

#include <sys/stat.h>

#include <filesystem>

#include "cudaagent/base/files.h"

namespace cudaagent {

std::string workspace_path(const std::string& dir) {
  std::filesystem::path path = std::filesystem::absolute(dir).lexically_normal();
  if (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  return path.string();
}

std::string workspace_id(const std::string& workspace_path) {
  return std::filesystem::path(workspace_path).filename().string();
}

Result<WorkspaceInput> workspace_input(const std::string& dir, const std::string& task_path,
                                       const std::string& task_bytes) {
  WorkspaceInput input;
  input.workspace_dir = workspace_path(dir);
  input.id = workspace_id(input.workspace_dir);
  if (!task_path.empty()) {
    input.model_py = task_bytes;
    input.task_source = "--task " + task_path;
    return input;
  }
  // Interactive use only: the workspace's own model.py is not protected from the candidate.
  if (!read_whole_file(input.workspace_dir + "/model.py", input.model_py)) {
    return Status::error("'" + dir + "' has no model.py and no --task was given");
  }
  input.task_source = "workspace model.py (not protected: pass --task for rewards)";
  return input;
}

Result<bool> inputs_are_workspaces(const std::vector<std::string>& inputs) {
  std::size_t directories = 0;
  for (const auto& input : inputs) {
    struct stat st {};
    directories += ::stat(input.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? 1 : 0;
  }
  if (directories != 0 && directories != inputs.size()) {
    return Status::error("give either workspace directories or JSONL files, not both");
  }
  return directories != 0;
}

}  // namespace cudaagent
