// The filter tool's plumbing: flags, the sandbox decision, the device list, and the record stage
// (store look-ups in the driver's thread, the filtering itself on --jobs worker threads, results
// committed before release). The judgement is lib/filter/filter.cpp and filter_checks.cpp.
#include "cudaagent/filter/stage.h"

#include <CLI/CLI.hpp>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <vector>

#include "cudaagent/base/paths.h"
#include "cudaagent/filter/memory_estimate.h"
#include "cudaagent/records/record_stage.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/sandbox/runner.h"

namespace cudaagent {
namespace {

bool parse_double(std::string_view text, double& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && std::isfinite(out);
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(separator, start), text.size());
    if (end > start) parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// --gpus, else CUDA_VISIBLE_DEVICES, else one entry per /dev/nvidiaN.
std::vector<std::string> resolve_gpus(const std::string& flag) {
  if (!flag.empty()) return split(flag, ',');
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr && *visible) {
    return split(visible, ',');
  }
  std::vector<std::string> gpus;
  for (const std::string& node : gpu_device_nodes()) {
    const std::string name = node.substr(node.rfind('/') + 1);  // nvidia0, nvidiactl, ...
    if (name.size() > 6 && name.find_first_not_of("0123456789", 6) == std::string::npos) {
      gpus.push_back(name.substr(6));
    }
  }
  return gpus;
}

Result<ProcessCredentials> parse_user(std::string_view text) {
  auto parsed = parse_credentials(text);
  if (!parsed) return Status::error("--run-as takes UID or UID:GID (numbers), not '" + std::string(text) + "'");
  return parsed;
}

class FilterStage final : public RecordStage {
 public:
  // give_up_after: how many tasks in a row may fail for a reason outside them (the harness could
  // not start, torch would not import, the GPU would not come up) before the run stops.
  FilterStage(const TaskFilter& filter, ResultStore* store, bool kept_only, int give_up_after,
              Session& session)
      : filter_(filter),
        store_(store),
        kept_only_(kept_only),
        give_up_after_(give_up_after),
        session_(session) {}

  std::string_view key() const override { return "filter"; }
  bool slow_records() const override { return true; }  // a sandboxed run per record

  RecordEdit process(const InputRecord& record) override { return prepare(record)(); }

  Work prepare(const InputRecord& record) override {
    std::string_view model_py;
    if (record.object["task"]["model_py"].get_string().get(model_py)) {
      ++failed_;
      return [] { return RecordEdit::error("record has no task.model_py string"); };
    }
    std::string id(record.id);
    std::string source(model_py);
    simdjson::dom::element task;
    const TaskMemory memory = record.object["task"].get(task) ? TaskMemory{} : task_memory_estimate(task);
    std::string job_key;
    if (store_ != nullptr) {
      job_key = filter_.job_key(source);
      auto stored = store_->find(job_key);
      if (!stored) {
        ++failed_;
        return [why = stored.status().message()] { return RecordEdit::error("store: " + why); };
      }
      if (stored.value()) {
        ++from_store_;
        return [this, value = std::move(*stored.value()), id] { return finish(id, value); };
      }
    }
    return [this, source = std::move(source), id = std::move(id), job_key = std::move(job_key),
            memory] {
      if (gave_up_.load()) return RecordEdit::interrupted();  // not run: a re-run does it
      FilterOutcome outcome = filter_.run(source, memory);
      if (outcome.stopped) return RecordEdit::interrupted();  // no result: a re-run does it
      if (outcome.infra) {
        ++failed_;
        session_.log.warn(cudaagent::quoted(id) + ": could not be filtered: " + outcome.infra_reason);
        note_infra_failure(outcome.infra_reason);
        return RecordEdit::error("could not filter the task (retry): " + outcome.infra_reason);
      }
      infra_in_a_row_.store(0);
      if (store_ != nullptr) {
        std::lock_guard lock(mutex_);
        pending_.push_back(StoredResult{job_key, "filter", id, outcome.json});
      }
      return finish(id, outcome.json);
    };
  }

  std::string given_up() const override {
    if (!gave_up_.load()) return {};
    std::lock_guard lock(mutex_);
    return give_up_reason_;
  }

  Status before_release() override {
    std::vector<StoredResult> batch;
    {
      std::lock_guard lock(mutex_);
      batch.swap(pending_);
    }
    if (store_ == nullptr || batch.empty()) return Status::ok();
    return store_->put_batch(batch).status();
  }

  void summarize() const {
    session_.log.info(std::to_string(kept_.load()) + " kept, " + std::to_string(rejected_.load()) +
                      " rejected, " + std::to_string(failed_.load()) + " not filtered (error records); " +
                      std::to_string(from_store_.load()) + " from the store");
  }

 private:
  // Whether a stored result kept its task, and the checks that rejected it ("determinism, ...").
  static bool read_value(const std::string& json, std::string* checks) {
    simdjson::dom::parser parser;
    simdjson::dom::object object;
    bool kept = false;
    if (parser.parse(json).get(object) || object["kept"].get(kept)) return false;
    simdjson::dom::array reasons;
    if (checks != nullptr && !object["reasons"].get(reasons)) {
      for (auto reason : reasons) {
        simdjson::dom::object fields;
        std::string_view check;
        if (!reason.get(fields) && !fields["check"].get(check)) {
          *checks += (checks->empty() ? "" : ", ") + std::string(check);
        }
      }
    }
    return kept;
  }

  // A broken harness or machine fails every task the same way, in a few milliseconds each: without
  // this, one bad setting turns a whole dataset's input into error records.
  void note_infra_failure(const std::string& reason) {
    if (infra_in_a_row_.fetch_add(1) + 1 < give_up_after_ || gave_up_.load()) return;
    std::lock_guard lock(mutex_);
    if (gave_up_.load()) return;
    give_up_reason_ = "gave up after " + std::to_string(give_up_after_) +
                      " tasks in a row could not be filtered, the last because " + reason +
                      ": the harness or the machine is at fault, not the tasks (the tasks not yet "
                      "filtered have no record; run again once it is fixed)";
    gave_up_.store(true);
  }

  RecordEdit finish(const std::string& id, const std::string& json) {
    std::string checks;
    const bool kept = read_value(json, &checks);
    ++(kept ? kept_ : rejected_);
    session_.log.info(cudaagent::quoted(id) + ": " + (kept ? "kept" : "rejected (" + checks + ")"));
    if (!kept && kept_only_) return RecordEdit::drop();
    return RecordEdit::set_key(json);
  }

  const TaskFilter& filter_;
  ResultStore* store_;
  bool kept_only_;
  int give_up_after_;
  Session& session_;
  mutable std::mutex mutex_;
  std::atomic<int> infra_in_a_row_{0};
  std::atomic<bool> gave_up_{false};
  std::string give_up_reason_;  // under mutex_
  std::vector<StoredResult> pending_;
  std::atomic<std::uint64_t> kept_{0}, rejected_{0}, failed_{0}, from_store_{0};
};

}  // namespace

Result<std::pair<double, double>> parse_window(std::string_view text) {
  const auto comma = text.find(',');
  double low = 0, high = 0;
  if (comma == std::string_view::npos || !parse_double(text.substr(0, comma), low) ||
      !parse_double(text.substr(comma + 1), high) || low < 0 || high < low) {
    return Status::error("--window-ms takes LOW,HIGH in milliseconds with 0 <= LOW <= HIGH, not '" +
                         std::string(text) + "'");
  }
  return std::pair{low, high};
}

Result<std::uint64_t> parse_size(std::string_view text) {
  std::uint64_t multiplier = 1;
  std::string_view digits = text;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K': multiplier = 1ull << 10; break;
      case 'M': multiplier = 1ull << 20; break;
      case 'G': multiplier = 1ull << 30; break;
      case 'T': multiplier = 1ull << 40; break;
      default: break;
    }
    if (multiplier != 1) digits.remove_suffix(1);
  }
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      value > (~std::uint64_t{0}) / multiplier) {
    return Status::error("--memory-limit takes a size such as 16G, 512M or 0, not '" +
                         std::string(text) + "'");
  }
  return value * multiplier;
}

namespace {

// A CLI11 check from one of our parsers, so a bad value is a usage error (exit 2).
template <class Parse>
CLI::Validator checked(Parse parse, const char* name) {
  return CLI::Validator(
      [parse](std::string& text) {
        auto parsed = parse(text);
        return parsed ? std::string() : parsed.status().message();
      },
      "", name);
}

}  // namespace

void add_filter_flags(CLI::App& app, FilterOptions& options) {
  add_common_flags(app, options.common);
  FilterSettings& s = options.settings;
  app.add_option("--device", s.device, "cuda, or cpu (CPU tasks, tests)")
      ->capture_default_str()->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--window-ms", options.window, "Eager median time window LOW,HIGH in ms")
      ->capture_default_str()->check(checked(parse_window, "window"));
  app.add_option("--atol", s.tolerance.atol, "Absolute tolerance for determinism and input "
                 "dependence")->capture_default_str();
  app.add_option("--rtol", s.tolerance.rtol, "Relative tolerance for determinism and input "
                 "dependence")->capture_default_str();
  app.add_option("--seed", s.seed, "Seed of the model init; the input draws use SEED+1 and SEED+2")
      ->capture_default_str();
  app.add_flag("--no-compile", options.no_compile, "Do not run torch.compile");
  app.add_option("--runs", s.timing_runs, "Timed calls of eager, and of the compiled model")->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--timeout", s.timeout_seconds, "Wall-clock limit of each harness job in "
                 "seconds")->capture_default_str()->check(CLI::Range(0.1, 86400.0));
  app.add_option("--memory-limit", options.memory_limit, "Memory limit of each harness job: "
                 "private writable memory, and on --device cpu the address space too (K/M/G/T "
                 "suffixes; 0: none)")->capture_default_str()
      ->check(checked(parse_size, "size"));
  app.add_option("--device-memory", s.device_memory_fraction, "The share of a GPU's memory the "
                 "tasks on it may take together, by the estimates synth's records allow: a task "
                 "that would go past it waits (0: admit by --jobs alone)")->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))->type_name("FRACTION");
  app.add_option("--gpus", options.gpus, "CUDA devices to spread tasks over, e.g. 0,1 (default: "
                 "CUDA_VISIBLE_DEVICES, else every GPU)")->type_name("LIST");
  app.add_flag("--kept-only", options.kept_only, "Write only kept tasks (default: every task, "
               "with kept true or false)");
  app.add_option("--python", s.python, "Interpreter with torch (default: the first python3 that "
                 "imports torch; or $CUDAAGENT_PYTHON)")->type_name("PATH");
  app.add_option("--cache-dir", s.cache_dir, "Discovery cache and timing-slot locks (default: "
                 "$CUDAAGENT_CACHE_DIR or ~/.cache/cudaagent)")->type_name("DIR");
  app.add_option("--run-as", options.run_as, "Run the harness workers as UID[:GID] (as root: "
                 "recommended, e.g. 65534)")->type_name("UID[:GID]")
      ->check(checked(parse_user, "user"));
  app.add_option("--bwrap", options.bwrap, "The bubblewrap program")->capture_default_str();
  app.add_flag("--allow-unsandboxed", options.allow_unsandboxed, "Run task code even when the "
               "OS sandbox is below the minimum");
  app.add_flag("--no-sandbox", options.no_sandbox, "Do not use the OS sandbox at all (needs "
               "--allow-unsandboxed)");
  app.add_flag("--keep-job-dirs", s.keep_job_dirs, "Keep the workers' and tasks' directories");
}

Result<StageEnd> run_filter(FilterOptions& options, Session& session) {
  FilterSettings& settings = options.settings;
  auto window = parse_window(options.window);
  if (!window) return window.status();
  settings.window_low_ms = window.value().first;
  settings.window_high_ms = window.value().second;
  auto memory = parse_size(options.memory_limit);
  if (!memory) return memory.status();
  settings.memory_limit_bytes = memory.value();
  settings.compile = !options.no_compile;
  if (!options.run_as.empty()) {
    auto user = parse_user(options.run_as);
    if (!user) return user.status();
    settings.run_as = user.value();
  }
  settings.stop = &session.stop_signal;
  if (settings.device == "cuda") {
    settings.gpus = resolve_gpus(options.gpus);
    if (settings.gpus.empty()) return Status::error("--device cuda, but no GPU was found (see --gpus)");
  }
  // The sandbox needs torch's paths, so torch is found first; the filter is then made with the
  // final settings (discovery is cached, so the second look is a file read).
  auto found = TaskFilter::create(settings);
  if (!found) return found.status();
  SandboxRequest request;
  request.bwrap = options.bwrap;
  request.allow_unsandboxed = options.allow_unsandboxed;
  request.no_sandbox = options.no_sandbox;
  request.read_only = torch_runtime_paths(found.value().torch());
  request.read_only.push_back(share_dir() + "/harness");
  request.gpu = settings.device == "cuda";
  auto choice = choose_sandbox(request, session.log);
  if (!choice) return choice.status();
  settings.sandbox = std::move(choice.value().wrap);
  settings.sandbox_summary = choice.value().summary;
  auto filter = TaskFilter::create(settings);
  if (!filter) return filter.status();
  session.log.info("torch " + filter.value().torch().torch_version + " (" +
                   filter.value().torch().python + "), device " + settings.device +
                   ", sandbox: " + settings.sandbox_summary);

  std::optional<ResultStore> store;
  if (!options.common.db.empty()) {
    auto opened = ResultStore::open(options.common.db);
    if (!opened) return opened.status();
    store.emplace(std::move(opened).value());
  }
  // Twice the jobs: every job in flight when the fault began fails once before any can succeed.
  const int give_up_after = std::max(8, 2 * options.common.jobs);
  FilterStage stage(filter.value(), store ? &*store : nullptr, options.kept_only, give_up_after, session);
  auto end = run_record_stage(stage, options.common, session);
  if (end && end.value() == StageEnd::kCompleted && session.stop_signal.load() != SIGPIPE) stage.summarize();
  return end;
}

}  // namespace cudaagent
