// The KernelBench export. Field meanings follow KernelBench: runtime and the baselines' "mean"
// are mean times per call in milliseconds (KernelBench divides them for its speedup); "std" is
// derived from the profile's coefficient of variation (cv x mean); -1.0 stands for "not timed".
#include "cudaagent/reward/kernelbench.h"

#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/session.h"

namespace cudaagent {
namespace {

bool read_int(simdjson::dom::element element, std::int64_t& out) {
  if (!element.get(out)) return true;
  std::string_view text;
  if (element.get(text) || text.empty()) return false;
  std::int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  out = value;
  return true;
}

// KernelBench's runtime_stats from one arm of profile.times_ms; "" when the arm was not timed.
std::string stats_json(simdjson::dom::element arm) {
  double mean = 0, min = 0, max = 0, cv = 0;
  std::int64_t trials = 0;
  if (arm["mean"].get(mean) && arm["median"].get(mean)) return {};
  std::string out;
  JsonWriter json(out);
  json.begin_object().field("mean", mean);
  json.field("std", arm["cv"].get(cv) ? 0.0 : cv * mean);
  json.field("min", arm["min"].get(min) ? mean : min).field("max", arm["max"].get(max) ? mean : max);
  if (arm["trials"].get(trials)) trials = 0;
  json.field("num_trials", trials).end_object();
  return out;
}

}  // namespace

Status KernelBenchExport::add(simdjson::dom::object record) {
  if (record["error"].error() == simdjson::SUCCESS) return Status::error("error record");
  simdjson::dom::object meta;
  if (record["task"]["meta"].get(meta)) return Status::error("no task.meta");
  std::int64_t level = 0, problem_id = 0;
  std::string_view name;
  if (!read_int(meta["level"], level) || !read_int(meta["problem_id"], problem_id) ||
      meta["name"].get(name) || name.empty()) {
    return Status::error("no task.meta level, problem_id and name (a KernelBench task)");
  }
  std::string_view verdict;
  if (record["reward"]["verdict"].get(verdict) && record["profile"]["verdict"].get(verdict) &&
      record["verify"]["verdict"].get(verdict)) {
    return Status::error("no verdict");
  }
  bool compiled = false;
  if (record["verify"]["build"]["ok"].get(compiled)) {
    compiled = verdict != "FAIL_COMPILE" && verdict != "REJECT_POLICY" && verdict != "INFRA_ERROR";
  }
  const bool correct = verdict == "PASS";
  simdjson::dom::element times, arm;
  const bool timed = !record["profile"]["times_ms"].get(times);
  std::string candidate;
  double runtime = -1.0;
  if (correct && timed && !times["candidate"].get(arm) && arm.is_object()) {
    candidate = stats_json(arm);
    if (arm["mean"].get(runtime) && arm["median"].get(runtime)) runtime = -1.0;
  }
  Problem& problem = levels_[level][problem_id];
  problem.file = std::string(name) + ".py";
  std::string sample;
  JsonWriter json(sample);
  json.begin_object().field("sample_id", static_cast<std::int64_t>(problem.samples.size()));
  json.field("compiled", compiled).field("correctness", correct);
  std::string_view id;
  json.key("metadata").begin_object();
  if (!record["id"].get(id)) json.field("cudaagent_id", id);
  json.field("verdict", verdict);
  std::string_view reason;
  if (!record["reward"]["reason"].get(reason) || !record["profile"]["reason"].get(reason) ||
      !record["verify"]["reason"].get(reason)) {
    json.field("reason", reason);
  }
  double reward = 0;
  if (!record["reward"]["value"].get(reward)) json.field("reward", reward);
  json.end_object();
  json.field("runtime", runtime).key("runtime_stats").raw(candidate.empty() ? "{}" : candidate);
  json.end_object();
  problem.samples.push_back(std::move(sample));
  ++samples_;
  if (timed) {
    if (problem.eager.empty() && !times["eager"].get(arm) && arm.is_object()) {
      problem.eager = stats_json(arm);
    }
    if (problem.compile.empty() && !times["compile"].get(arm) && arm.is_object()) {
      problem.compile = stats_json(arm);
      std::string_view mode;
      if (record["profile"]["baselines"]["compile"]["mode"].get(mode) || mode.empty()) mode = "default";
      problem.compile_mode = std::string(mode);
    }
  }
  return Status::ok();
}

Result<std::vector<std::string>> KernelBenchExport::write(const std::string& dir) const {
  namespace fs = std::filesystem;
  std::vector<std::string> written;
  const auto write = [&](const fs::path& path, const std::string& text) -> Status {
    std::error_code error;
    fs::create_directories(path.parent_path(), error);
    if (error || !write_file_atomically(path.string(), text) || ::chmod(path.c_str(), 0644) != 0) {
      return Status::error("cannot write " + cudaagent::quoted(path.string()));
    }
    written.push_back(path.string());
    return Status::ok();
  };
  std::string eager;
  JsonWriter eager_json(eager);
  eager_json.begin_object();
  std::set<std::string> modes;
  for (const auto& [level, problems] : levels_) {
    for (const auto& [id, problem] : problems) {
      if (!problem.compile.empty()) modes.insert(problem.compile_mode);
    }
  }
  for (const auto& [level, problems] : levels_) {
    std::string results;
    JsonWriter json(results);
    json.begin_object();
    for (const auto& [id, problem] : problems) {
      json.key(std::to_string(id)).begin_array();
      for (const std::string& sample : problem.samples) json.raw(sample);
      json.end_array();
    }
    json.end_object();
    results.push_back('\n');
    if (Status s = write(fs::path(dir) / ("level" + std::to_string(level)) / "eval_results.json", results); !s) {
      return s;
    }
    eager_json.key("level" + std::to_string(level)).begin_object();
    for (const auto& [id, problem] : problems) {
      if (!problem.eager.empty()) eager_json.key(problem.file).raw(problem.eager);
    }
    eager_json.end_object();
  }
  eager_json.end_object();
  eager.push_back('\n');
  if (Status s = write(fs::path(dir) / "timing" / "baseline_time_torch.json", eager); !s) return s;
  for (const std::string& mode : modes) {
    std::string doc;
    JsonWriter json(doc);
    json.begin_object();
    for (const auto& [level, problems] : levels_) {
      json.key("level" + std::to_string(level)).begin_object();
      for (const auto& [id, problem] : problems) {
        if (!problem.compile.empty() && problem.compile_mode == mode) json.key(problem.file).raw(problem.compile);
      }
      json.end_object();
    }
    json.end_object();
    doc.push_back('\n');
    if (Status s = write(fs::path(dir) / "timing" / ("baseline_time_torch_compile_inductor_" + mode + ".json"), doc); !s) {
      return s;
    }
  }
  return written;
}

}  // namespace cudaagent
