// Reading KernelBench's folders: levelL/N_Name.py, ordered by level and problem number (not by
// name: "10_..." comes after "9_...").
#include "cudaagent/synth/kernelbench.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/session.h"
#include "cudaagent/base/sha256.h"

namespace cudaagent::synth {
namespace {

namespace fs = std::filesystem;

// "level3" -> 3; 0 when the name is not levelL.
std::int64_t level_of(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "level") != 0) return 0;
  std::int64_t level = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || level > 1'000'000) return 0;
    level = level * 10 + (name[i] - '0');
  }
  return level;
}

// The problems of one level folder.
Status add_level(const fs::path& dir, std::int64_t level, std::vector<KernelBenchProblem>& out) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string file = entry.path().filename().string();
    if (!entry.is_regular_file(error) || file.size() < 5 || file.substr(file.size() - 3) != ".py") continue;
    const std::string name = file.substr(0, file.size() - 3);
    const std::size_t underscore = name.find('_');
    if (underscore == 0 || underscore == std::string::npos) continue;
    std::int64_t id = 0;
    bool number = true;
    for (std::size_t i = 0; i < underscore; ++i) {
      if (name[i] < '0' || name[i] > '9' || id > 1'000'000'000) {
        number = false;
        break;
      }
      id = id * 10 + (name[i] - '0');
    }
    if (!number) continue;
    out.push_back({level, id, name, "level" + std::to_string(level) + "/" + file, entry.path().string()});
  }
  if (error) return Status::error("cannot read " + cudaagent::quoted(dir.string()) + ": " + error.message());
  return Status::ok();
}

}  // namespace

Result<std::vector<KernelBenchProblem>> list_kernelbench(const std::string& dir) {
  std::error_code error;
  const fs::path root(dir);
  if (!fs::is_directory(root, error)) return Status::error(cudaagent::quoted(dir) + " is not a directory");
  std::vector<KernelBenchProblem> problems;
  const std::int64_t own = level_of(root.lexically_normal().filename().string().empty()
                                        ? root.lexically_normal().parent_path().filename().string()
                                        : root.lexically_normal().filename().string());
  if (own > 0) {
    if (Status s = add_level(root, own, problems); !s) return s;
  } else {
    bool found = false;
    for (const auto& entry : fs::directory_iterator(root, error)) {
      const std::int64_t level = level_of(entry.path().filename().string());
      if (level == 0 || !entry.is_directory(error)) continue;
      found = true;
      if (Status s = add_level(entry.path(), level, problems); !s) return s;
    }
    if (error) return Status::error("cannot read " + cudaagent::quoted(dir) + ": " + error.message());
    if (!found) {
      return Status::error(cudaagent::quoted(dir) + " holds no level folders (level1, level2, ...) and is not one: "
                           "give KernelBench's dataset folder (KernelBench/KernelBench) or a level folder");
    }
  }
  std::sort(problems.begin(), problems.end(), [](const auto& a, const auto& b) {
    return a.level != b.level ? a.level < b.level
                              : a.problem_id != b.problem_id ? a.problem_id < b.problem_id : a.name < b.name;
  });
  return problems;
}

std::string kernelbench_task_record(const KernelBenchProblem& problem, const std::string& model_py) {
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("id", sha256_hex(model_py)).key("task").begin_object();
  w.field("source", "kernelbench").field("model_py", model_py).key("ops").begin_array().end_array();
  w.key("meta").begin_object().field("level", problem.level).field("problem_id", problem.problem_id);
  w.field("name", problem.name).field("file", problem.file).end_object();
  w.end_object().end_object();
  out.push_back('\n');
  return out;
}

}  // namespace cudaagent::synth
