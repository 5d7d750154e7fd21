// KernelBench's problems as task records (cudaagent-synth --import-kernelbench DIR): DIR is
// KernelBench's dataset folder (holding level1, level2, ...) or one level folder, whose files
// N_Name.py each become {"id", "task": {"source": "kernelbench", "model_py", "ops": [],
// "meta": {"level", "problem_id", "name", "file"}}}. The same meta lets cudaagent-reward
// --export-kernelbench write results back in KernelBench's form.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent::synth {

struct KernelBenchProblem {
  std::int64_t level = 0;
  std::int64_t problem_id = 0;  // N of N_Name.py
  std::string name;             // N_Name
  std::string file;             // levelL/N_Name.py, relative to the dataset folder
  std::string path;             // where it is on disk
};

// The problems under `dir`, by level, then problem id. Files that are not N_Name.py are left out.
// A Status when `dir` cannot be read or holds no level folder (levelL) and is not one.
Result<std::vector<KernelBenchProblem>> list_kernelbench(const std::string& dir);

// One task record line ('\n'-terminated); its id is the SHA-256 of model_py, as synth's own.
std::string kernelbench_task_record(const KernelBenchProblem& problem, const std::string& model_py);

}  // namespace cudaagent::synth
