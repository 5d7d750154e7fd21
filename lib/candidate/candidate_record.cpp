// Reads the candidate a record carries (see candidate_record.h for the shape).
#include "cudaagent/candidate/candidate_record.h"

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

}  // namespace cudaagent
