// The candidate a record carries, as cudaagent-verify reads it and cudaagent-profile reads it
// again from verify's output:
//   {"task": {"model_py": TEXT}, "candidate": {"files": {NAME: TEXT, ...}} | {"workspace": PATH}}
#pragma once

#include <simdjson.h>

#include <map>
#include <string>

#include "cudaagent/base/status.h"

namespace cudaagent {

struct CandidateSource {
  std::string model_py;                      // the pristine task
  std::string workspace_dir;                 // set, or:
  std::map<std::string, std::string> files;  // relative name -> bytes
};

// A Status (its message fit for the record's error) when the record has not that shape.
Result<CandidateSource> read_candidate_record(simdjson::dom::object record);

}  // namespace cudaagent
