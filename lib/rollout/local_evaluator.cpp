// The evaluator over Verifier, Profiler and the reward. Every failure of the machinery becomes a
// message the agent reads (and INFRA_ERROR in the final score), never an exception or a crash of
// the rollout: an episode's evaluation going wrong must not cost the other episodes.
#include "cudaagent/rollout/local_evaluator.h"

#include <simdjson.h>

#include <filesystem>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/candidate/extension_build.h"
#include "cudaagent/candidate/static_policy.h"
#include "cudaagent/candidate/workspace.h"
#include "cudaagent/profile/report.h"
#include "cudaagent/sandbox/runner.h"

namespace cudaagent::rollout {
namespace {

constexpr std::size_t kCacheEntries = 512;

// Holds one slot of a pool for a scope.
class Lease {
 public:
  explicit Lease(SlotPool& pool) : pool_(pool), index_(pool.acquire()) {}
  ~Lease() { pool_.release(index_); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  int index() const { return index_; }

 private:
  SlotPool& pool_;
  int index_;
};

std::string tail(const std::string& text, std::size_t bytes) {
  return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
}

// `text` with every occurrence of `prefix` removed: compiler output names the private build folder,
// which means nothing to the agent (its files are relative to the workspace).
std::string without(std::string text, const std::string& prefix) {
  for (std::size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at)) {
    text.erase(at, prefix.size());
  }
  return text;
}

std::string infra_json(const std::string& reason) {
  std::string json;
  JsonWriter w(json);
  w.begin_object().field("verdict", "INFRA_ERROR").field("reason", reason).end_object();
  return json;
}

}  // namespace

int SlotPool::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    for (std::size_t i = 0; i < free_.size(); ++i) {
      if (free_[i]) {
        free_[i] = false;
        return static_cast<int>(i);
      }
    }
    available_.wait(lock);
  }
}

void SlotPool::release(int index) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[static_cast<std::size_t>(index)] = true;
  }
  available_.notify_one();
}

struct LocalEvaluator::Slot {
  std::optional<Verifier> verifier;
  std::optional<Profiler> profiler;
};

std::string verify_report(const std::string& verify_json) {
  simdjson::dom::parser parser;
  simdjson::dom::element v;
  if (parser.parse(verify_json).get(v)) return "verification: the evaluator's answer could not be read\n";
  std::string_view verdict = "INFRA_ERROR", reason;
  if (v["verdict"].get(verdict)) verdict = "INFRA_ERROR";
  if (v["reason"].get(reason)) reason = {};
  std::string out = "verification: " + std::string(verdict) +
                    (reason.empty() ? "" : " (" + std::string(reason) + ")") + "\n";
  std::string_view text;
  if (!v["build"]["diagnostics"].get(text) && !text.empty())
    out += "\ncompiler errors:\n" + std::string(text) + "\n";
  bool built = true;
  if (!v["build"]["ok"].get(built) && !built && !v["build"]["log_tail"].get(text) && !text.empty()) {
    out += "\ncompiler output (end):\n" + tail(std::string(text), 3000) + "\n";
  }
  simdjson::dom::array findings;
  if (!v["policy"]["findings"].get(findings) && findings.size() > 0) {
    out += "\npolicy findings:\n";
    for (simdjson::dom::element f : findings) {
      std::string_view rule, path, detail;
      if (f["rule"].get(rule)) rule = "?";
      if (f["path"].get(path)) path = "?";
      if (f["detail"].get(detail)) detail = {};
      out += "  " + std::string(rule) + ": " + std::string(path) + ": " + std::string(detail) + "\n";
    }
  }
  simdjson::dom::object forbidden;
  if (!v["policy"]["forbidden_ops"].get(forbidden) && forbidden.size() > 0) {
    out += "\ntorch operators your forward ran (not allowed):";
    for (auto [name, count] : forbidden) out += " " + std::string(name);
    out += "\n";
  }
  simdjson::dom::array checks;
  if (!v["checks"].get(checks)) {
    for (simdjson::dom::element check : checks) {
      bool match = true;
      if (!check["match"].get(match) && match) continue;
      out += "\ncheck " + simdjson::minify(check) + "\n";
    }
  }
  if (!v["candidate_stderr"].get(text) && !text.empty())
    out += "\nyour process's stderr (end):\n" + tail(std::string(text), 3000) + "\n";
  return out;
}

Result<std::unique_ptr<LocalEvaluator>> LocalEvaluator::create(LocalEvaluatorSettings settings) {
  if (settings.verify.cache_dir.empty()) settings.verify.cache_dir = cache_dir();
  settings.verify.cache_dir = std::filesystem::absolute(settings.verify.cache_dir).string();
  if (settings.profile.cache_dir.empty()) settings.profile.cache_dir = settings.verify.cache_dir;
  auto torch =
      find_torch_for_device(settings.verify.python, settings.verify.cache_dir, settings.verify.device);
  if (!torch) return torch.status();
  std::unique_ptr<LocalEvaluator> evaluator(
      new LocalEvaluator(std::move(settings), std::move(torch).value()));
  const std::string share = share_dir();
  if (!read_whole_file(share + "/workspace/binding.cpp", evaluator->binding_cpp_) ||
      !read_whole_file(share + "/workspace/binding_registry.h", evaluator->binding_registry_h_)) {
    return Status::error("cannot read the pristine binding files in '" + share + "/workspace'");
  }
  return evaluator;
}

LocalEvaluator::LocalEvaluator(LocalEvaluatorSettings settings, TorchEnv torch)
    : settings_(std::move(settings)), torch_(std::move(torch)), build_pool_(settings_.build_slots) {
  for (int i = 0; i < std::max(settings_.slots, 1); ++i) slots_.push_back(std::make_unique<Slot>());
  for (std::size_t i = 0; i < slots_.size(); ++i) threads_.emplace_back([this, i] { slot_thread(i); });
}

LocalEvaluator::~LocalEvaluator() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void LocalEvaluator::slot_thread(std::size_t index) {
  Slot& slot = *slots_[index];
  for (;;) {
    std::packaged_task<void(Slot&)>* task = nullptr;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping, and nothing left to do
      task = queue_.front();
      queue_.pop_front();
    }
    (*task)(slot);
  }
  // The workers end here, in the thread that started them.
  slot.profiler.reset();
  slot.verifier.reset();
}

void LocalEvaluator::on_slot(std::function<void(Slot&)> work) {
  std::packaged_task<void(Slot&)> task(std::move(work));
  std::future<void> done = task.get_future();
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    queue_.push_back(&task);
  }
  queue_ready_.notify_one();
  done.get();
}

Result<std::string> LocalEvaluator::content_key(const EvalRequest& request, std::string* files_json) {
  const ProtectedFiles protected_files =
      standard_protected_files(request.model_py, binding_cpp_, binding_registry_h_);
  auto snapshot = snapshot_workspace(request.workspace, SnapshotLimits{}, protected_files);
  if (!snapshot) return snapshot.status();
  Sha256 key;
  key.add_part(sha256_hex(request.model_py)).add_part(snapshot.value().content_hash);
  // Findings are not part of the content hash, but they decide the verdict.
  for (const PolicyFinding& finding : snapshot.value().findings) {
    key.add_part(finding.rule).add_part(finding.path).add_part(finding.detail);
  }
  if (files_json != nullptr) {
    files_json->clear();
    JsonWriter w(*files_json);
    w.begin_object();
    for (const auto& [name, bytes] : snapshot.value().files) w.field(name, bytes);
    w.end_object();
  }
  return key.hex_digest();
}

std::optional<LocalEvaluator::Outcome> LocalEvaluator::cached(std::map<std::string, Outcome>& cache,
                                                              const std::string& key) {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  const auto found = cache.find(key);
  if (found == cache.end()) return std::nullopt;
  return found->second;
}

void LocalEvaluator::remember(std::map<std::string, Outcome>& cache, std::deque<std::string>& order,
                              const std::string& key, const Outcome& outcome) {
  if (outcome.verdict == "INFRA_ERROR") return;  // the machinery failed: ask again next time
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache.emplace(key, outcome).second) order.push_back(key);
  while (order.size() > kCacheEntries) {
    cache.erase(order.front());
    order.pop_front();
  }
}

LocalEvaluator::Outcome LocalEvaluator::run_verify(const EvalRequest& request, const std::string& key) {
  if (auto hit = cached(verified_, key)) return *hit;
  Outcome outcome;
  on_slot([&](Slot& slot) {
    if (!slot.verifier) {
      auto made = Verifier::create(settings_.verify);
      if (!made) {
        outcome = {"INFRA_ERROR", made.status().message(), infra_json(made.status().message())};
        return;
      }
      slot.verifier.emplace(std::move(made).value());
    }
    VerifyRequest verify;
    verify.id = request.episode_id;
    verify.model_py = request.model_py;
    verify.workspace_dir = request.workspace;
    auto result = slot.verifier->verify(verify);
    if (!result) {
      outcome = {"INFRA_ERROR", result.status().message(), infra_json(result.status().message())};
      return;
    }
    outcome = {std::string(verdict_name(result.value().verdict)), result.value().reason, result.value().json};
  });
  remember(verified_, verified_order_, key, outcome);
  return outcome;
}

LocalEvaluator::Outcome LocalEvaluator::run_profile(const EvalRequest& request, const std::string& key) {
  if (auto hit = cached(profiled_, key)) return *hit;
  Outcome outcome;
  on_slot([&](Slot& slot) {
    if (!slot.profiler) {
      auto made = Profiler::create(settings_.profile);
      if (!made) {
        outcome = {"INFRA_ERROR", made.status().message(), infra_json(made.status().message())};
        return;
      }
      slot.profiler.emplace(std::move(made).value());
    }
    ProfileRequest profile;
    profile.id = request.episode_id;
    profile.model_py = request.model_py;
    profile.workspace_dir = request.workspace;
    auto result = slot.profiler->profile(profile);
    if (!result) {
      outcome = {"INFRA_ERROR", result.status().message(), infra_json(result.status().message())};
      return;
    }
    outcome = {std::string(verdict_name(result.value().verdict)), result.value().reason, result.value().json};
  });
  remember(profiled_, profiled_order_, key, outcome);
  return outcome;
}

EvalReply LocalEvaluator::compile(const EvalRequest& request) {
  const ProtectedFiles protected_files =
      standard_protected_files(request.model_py, binding_cpp_, binding_registry_h_);
  auto snapshot = snapshot_workspace(request.workspace, SnapshotLimits{}, protected_files);
  if (!snapshot)
    return {"compile: cannot read the workspace: " + snapshot.status().message() + "\n", 2, "INFRA_ERROR"};
  std::string notes;
  for (const PolicyFinding& finding : snapshot.value().findings) {
    notes += "  " + finding.rule + ": " + finding.path + ": " + finding.detail + "\n";
  }
  // The verifier's source scans too, so the agent learns them before it asks to verify.
  for (const PolicyFinding& finding : scan_candidate_sources(snapshot.value().files)) {
    notes += "  " + finding.rule + ": " + finding.path + ": " + finding.detail + "\n";
  }
  if (!notes.empty()) notes = "\nthe verifier will reject this workspace as it is:\n" + notes;
  Lease lease(build_pool_);
  auto root = make_private_dir(settings_.verify.scratch_dir, "cudaagent-compile");
  if (!root) return {"compile: " + root.status().message() + "\n", 2, "INFRA_ERROR"};
  RemovedTree remove(root.value(), false);
  const std::string work = root.value() + "/work";
  if (auto status = materialize(snapshot.value(), protected_files, work); !status) {
    return {"compile: " + status.message() + "\n", 2, "INFRA_ERROR"};
  }
  BuildOptions options = settings_.verify.build;
  options.cuda = settings_.verify.device == "cuda";
  if (options.cache_dir.empty()) options.cache_dir = settings_.verify.cache_dir + "/build";
  if (settings_.verify.sandbox)
    options.runner = sandboxed_build_runner(settings_.verify.sandbox, work, options.cache_dir);
  auto built = build_extension(work, work, torch_, options);
  if (!built)
    return {"compile: the build machinery failed: " + built.status().message() + "\n", 2, "INFRA_ERROR"};
  const BuildResult& b = built.value();
  std::string text;
  for (const CompileStep& step : b.steps) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", step.seconds);
    text += (step.ok ? "  ok      " : "  FAILED  ") + step.source + " (" + step.tool +
            (step.cached ? ", cached" : ", " + std::string(seconds) + " s") + ")\n";
  }
  if (b.ok) {
    text = "compile: built " + options.module_name + "\n" + text;
    if (!b.warnings.empty()) text += "\nwarnings:\n" + without(b.warnings, work + "/").substr(0, 3000) + "\n";
    return {text + notes, 0, "compiled"};
  }
  text = "compile: FAILED\n" + text;
  if (!b.diagnostics.empty()) text += "\nerrors:\n" + without(b.diagnostics, work + "/") + "\n";
  if (!b.log.empty()) text += "\ncompiler output (end):\n" + tail(without(b.log, work + "/"), 4000) + "\n";
  return {text + notes, 1, "FAIL_COMPILE"};
}

EvalReply LocalEvaluator::verify(const EvalRequest& request) {
  auto key = content_key(request, nullptr);
  if (!key)
    return {"verification: cannot read the workspace: " + key.status().message() + "\n", 2, "INFRA_ERROR"};
  const Outcome outcome = run_verify(request, key.value());
  return {verify_report(outcome.json), outcome.verdict == "PASS" ? 0 : 1, outcome.verdict};
}

EvalReply LocalEvaluator::profile(const EvalRequest& request) {
  auto key = content_key(request, nullptr);
  if (!key)
    return {"profiling: cannot read the workspace: " + key.status().message() + "\n", 2, "INFRA_ERROR"};
  const Outcome outcome = run_profile(request, key.value());
  simdjson::dom::parser parser;
  simdjson::dom::element value;
  std::string text =
      "profiling: " + outcome.verdict + (outcome.reason.empty() ? "" : " (" + outcome.reason + ")") + "\n";
  if (!parser.parse(outcome.json).get(value)) text += brief_text(value);
  return {text, outcome.verdict == "PASS" ? 0 : 1, outcome.verdict};
}

FinalScore LocalEvaluator::final_score(const EvalRequest& request) {
  FinalScore score;
  auto key = content_key(request, &score.candidate_files_json);
  if (!key) {
    score.verify_json = infra_json("cannot read the workspace: " + key.status().message());
    score.verdict = "INFRA_ERROR";
    score.candidate_files_json = "{}";
    return score;
  }
  const Outcome verified = run_verify(request, key.value());
  score.verify_json = verified.json;
  score.verdict = verified.verdict;
  if (verified.verdict == "PASS" && settings_.profile_final) {
    const Outcome profiled = run_profile(request, key.value());
    score.profile_json = profiled.json;
    score.verdict = profiled.verdict;
  }
  std::string record = "{\"verify\":" + score.verify_json;
  if (!score.profile_json.empty()) record += ",\"profile\":" + score.profile_json;
  record += "}";
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(record).get(object)) return score;
  auto inputs = read_reward_inputs(object);
  if (!inputs) return score;  // INFRA_ERROR or a malformed value: no reward, the record says why
  auto decision = decide_reward(inputs.value(), settings_.reward);
  if (!decision) return score;
  score.reward = decision.value().value;
  score.reward_json = reward_json(inputs.value(), decision.value(), settings_.reward);
  return score;
}

}  // namespace cudaagent::rollout
