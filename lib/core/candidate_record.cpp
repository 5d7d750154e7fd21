#include "cudaagent/candidate_record.h"

#include <sys/stat.h>

#include <filesystem>

#include "cudaagent/paths.h"

namespace cudaagent {

Result<CandidateSource> read_candidate_record(simdjson::dom::object record) {
  CandidateSource source;
  std::string_view model_py;
  if (record["task"]["model_py"].get_string().get(model_py)) {
    return Status::error("record has no task.model_py (the pristine reference source)");
  }
  source.model_py = std::string(model_py);
  simdjson::dom::object candidate, files;
  if (record["candidate"].get_object().get(candidate)) return Status::error("record has no 'candidate' object");
  std::string_view workspace;
  if (!candidate["files"].get_object().get(files)) {
    for (auto field : files) {
      std::string_view bytes;
      if (field.value.get_string().get(bytes)) {
        return Status::error("candidate.files['" + std::string(field.key) + "'] is not a string");
      }
      source.files.emplace(std::string(field.key), std::string(bytes));
    }
  } else if (!candidate["workspace"].get_string().get(workspace)) {
    source.workspace_dir = std::string(workspace);
  } else {
    return Status::error("candidate has neither 'files' nor 'workspace'");
  }
  return source;
}

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
