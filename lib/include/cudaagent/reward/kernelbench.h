// Scored records in KernelBench's result form (cudaagent-reward --export-kernelbench DIR), so that
// KernelBench's own analysis and plots read our runs: per level, runs' eval_results.json
// ({"<problem_id>": [{sample_id, compiled, correctness, metadata, runtime, runtime_stats}]}), and
// the baselines as its timing files ({"level<L>": {"<file>.py": {mean, std, min, max,
// num_trials}}}, eager and torch.compile). Records know their KernelBench problem through
// task.meta {level, problem_id, name}, which `cudaagent-synth --import-kernelbench` writes.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

class KernelBenchExport {
 public:
  // Adds one record. A Status (the reason it cannot be exported) for a record without
  // task.meta.level / problem_id / name, an error record, or one without a verdict; the caller
  // counts those. Several candidates of one problem become samples 0, 1, ... in input order.
  Status add(simdjson::dom::object record);

  // Writes DIR/level<L>/eval_results.json for every level seen, and
  // DIR/timing/baseline_time_torch.json and baseline_time_torch_compile_inductor_<mode>.json
  // (from the first record of each problem that has those times). Returns the files written.
  Result<std::vector<std::string>> write(const std::string& dir) const;

  std::uint64_t samples() const { return samples_; }

 private:
  struct Problem {
    std::string file;                  // "<name>.py"
    std::vector<std::string> samples;  // each sample's JSON object
    std::string eager, compile;        // the baselines' stats objects, or ""
    std::string compile_mode;
  };
  std::map<std::int64_t, std::map<std::int64_t, Problem>> levels_;  // level -> problem id -> ...
  std::uint64_t samples_ = 0;
};

}  // namespace cudaagent
