// The two input modes of the scoring stages: workspace directories named on the command line, or
// JSONL files of candidate records (candidate_record.h); and how a workspace argument becomes one.
#pragma once

#include <string>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

// A workspace named on the command line: its absolute path, its id (the directory's name) and the
// pristine task — the bytes of --task (`task_path`, read once into `task_bytes`) when given, else
// the workspace's own model.py, which the candidate could have edited (`task_source` says which).
// A workspace directory as an absolute, normal path without a trailing '/' (so that "ws/" has the
// id "ws"), and that id.
std::string workspace_path(const std::string& dir);
std::string workspace_id(const std::string& workspace_path);

struct WorkspaceInput {
  std::string id, workspace_dir, model_py, task_source;
};
Result<WorkspaceInput> workspace_input(const std::string& dir, const std::string& task_path,
                                       const std::string& task_bytes);

// True when every input is a directory (workspaces), false when none is (JSONL files); a Status
// when they are mixed.
Result<bool> inputs_are_workspaces(const std::vector<std::string>& inputs);

}  // namespace cudaagent
