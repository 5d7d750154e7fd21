// The candidate a record carries, as cudaagent-verify reads it and cudaagent-profile reads it
// again from verify's output:
//   {"task": {"model_py": TEXT}, "candidate": {"files": {NAME: TEXT, ...}} | {"workspace": PATH}}
// and the two input modes those tools share: workspace directories, or JSONL files of such records.
#pragma once

#include <simdjson.h>

#include <map>
#include <string>
#include <vector>

#include "cudaagent/status.h"

namespace cudaagent {

struct CandidateSource {
  std::string model_py;                      // the pristine task
  std::string workspace_dir;                 // set, or:
  std::map<std::string, std::string> files;  // relative name -> bytes
};

// A Status (its message fit for the record's error) when the record has not that shape.
Result<CandidateSource> read_candidate_record(simdjson::dom::object record);

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
