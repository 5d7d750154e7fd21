// The reward stage: decisions from lib/reward/reward.cpp, records through the shared driver, and the
// optional store. A stored reward is keyed by the content the decision read (verify and profile,
// minified), the settings and the reward code's version, so a re-run with the same inputs and
// settings takes the stored value and a change to any of them scores afresh.
#include "cudaagent/reward/stage.h"

#include <CLI/CLI.hpp>

#include <optional>
#include <vector>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/records/record_sink.h"
#include "cudaagent/records/record_stage.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/reward/kernelbench.h"
#include "cudaagent/reward/summary.h"

namespace cudaagent {
namespace {

// Bump when the decision rules change, so stored rewards from older rules are not reused.
constexpr std::string_view kRewardRulesVersion = "reward-rules-2";

class RewardStage final : public RecordStage {
 public:
  RewardStage(const RewardSettings& settings, ResultStore* store)
      : settings_(settings), store_(store) {}

  std::string_view key() const override { return "reward"; }

  RecordEdit process(const InputRecord& record) override {
    std::string job_key;
    if (store_ != nullptr) {
      job_key = job_key_for(record);
      auto stored = store_->find(job_key);
      if (!stored) return RecordEdit::error("store: " + stored.status().message());
      if (stored.value()) return RecordEdit::set_key(std::move(*stored.value()));
    }
    auto inputs = read_reward_inputs(record.object);
    if (!inputs) return RecordEdit::error(inputs.status().message());
    auto decision = decide_reward(inputs.value(), settings_);
    if (!decision) return RecordEdit::error(decision.status().message());
    std::string value = reward_json(inputs.value(), decision.value(), settings_);
    if (store_ != nullptr) {
      pending_.push_back(StoredResult{job_key, "reward", std::string(record.id), value});
    }
    return RecordEdit::set_key(std::move(value));
  }

  Status before_release() override {
    if (store_ == nullptr || pending_.empty()) return Status::ok();
    auto inserted = store_->put_batch(pending_);
    pending_.clear();
    return inserted.status();
  }

 private:
  std::string job_key_for(const InputRecord& record) const {
    Sha256 hash;
    hash.add_part(kRewardRulesVersion).add_part(reward_form_name(settings_.form));
    hash.add_part(std::to_string(settings_.margin)).add_part(settings_.baseline);
    hash.add_part(std::to_string(settings_.fail_value)).add_part(settings_.trusted_code ? "trusted" : "untrusted");
    hash.add_part(record.id);
    for (std::string_view key : {"verify", "profile"}) {
      simdjson::dom::element value;
      hash.add_part(record.object[key].get(value) ? std::string("<absent>") : decision_text(value));
    }
    return hash.hex_digest();
  }

  // The value as the decision reads it: minified, without the top-level "store" member that
  // verify and profile add when they took a result from their store. A re-run that takes every
  // result from the store then keys its rewards as the first run did, and stores no new rows.
  static std::string decision_text(simdjson::dom::element value) {
    simdjson::dom::object object;
    if (value.get(object) || object.at_key("store").error() != simdjson::SUCCESS) {
      return simdjson::minify(value);
    }
    std::string text = "{";
    for (auto field : object) {
      if (field.key == "store") continue;
      if (text.size() > 1) text.push_back(',');
      append_json_string(text, field.key);
      text.push_back(':');
      text += simdjson::minify(field.value);
    }
    text.push_back('}');
    return text;
  }

  const RewardSettings& settings_;
  ResultStore* store_;
  std::vector<StoredResult> pending_;
};

// The report modes: every record read, none written on.
Result<StageEnd> run_report(RewardOptions& options, Session& session) {
  ResultSummary summary;
  KernelBenchExport kernelbench;
  std::uint64_t not_exported = 0;
  const bool summarise = options.summary || options.summary_json || !options.plots.empty();
  Status read = read_records(options.common, session, "reward", [&](const InputRecord& record) {
    if (summarise) {
      auto scored = read_scored_record(record.object);
      if (scored) {
        summary.add(scored.value());
      } else {
        summary.add_unscored(scored.status().message());
      }
    }
    if (!options.export_kernelbench.empty() && !kernelbench.add(record.object)) ++not_exported;
    return Status::ok();
  });
  if (!read) return read;
  if (!options.export_kernelbench.empty()) {
    auto written = kernelbench.write(options.export_kernelbench);
    if (!written) return written.status();
    session.log.info("KernelBench form: " + std::to_string(kernelbench.samples()) + " samples in " +
                     std::to_string(written.value().size()) + " files under " +
                     cudaagent::quoted(options.export_kernelbench) +
                     (not_exported > 0 ? "; " + std::to_string(not_exported) +
                                             " records left out (no KernelBench task.meta, or error records)"
                                       : std::string()));
  }
  if (!summarise) return StageEnd::kCompleted;
  if (!options.plots.empty()) {
    auto written = summary.write_plots(options.plots);
    if (!written) return written.status();
    std::string names;
    for (const auto& path : written.value()) names += " " + path;
    session.log.info("plots:" + names);
  }
  if (!options.summary && !options.summary_json) return StageEnd::kCompleted;
  auto sink = RecordSink::open(options.common.output);
  if (!sink) return sink.status();
  Status status = Status::ok();
  if (options.summary) status = sink.value().write(summary.text());
  if (status && options.summary_json) status = sink.value().write(summary.json());
  if (!status) return sink.value().pipe_closed() ? Result<StageEnd>(StageEnd::kPipeClosed) : Result<StageEnd>(status);
  return finish_sink(sink.value(), session);
}

// --merge: each store's results into --db, in one transaction per store.
Result<StageEnd> run_merge(RewardOptions& options, Session& session) {
  auto target = ResultStore::open(options.common.db);
  if (!target) return target.status();
  for (const std::string& path : options.merge) {
    if (session.stop_signal.load() != 0) break;
    auto merged = target.value().merge_from(path);
    if (!merged) return merged.status().with_context("merging " + cudaagent::quoted(path));
    std::string text;
    std::size_t held = 0, added = 0;
    for (const auto& count : merged.value()) {
      text += (text.empty() ? "" : ", ") + count.stage + " " + std::to_string(count.added) + "/" +
              std::to_string(count.held);
      held += count.held;
      added += count.added;
    }
    session.log.info("merged " + cudaagent::quoted(path) + ": " + std::to_string(added) + " of " +
                     std::to_string(held) + " results new" + (text.empty() ? "" : " (" + text + ")"));
  }
  return StageEnd::kCompleted;
}

}  // namespace

void add_reward_flags(CLI::App& app, RewardOptions& options) {
  add_common_flags(app, options.common);
  app.add_option("--form", options.form, "Reward form: milestone, speedup or log-speedup")
      ->capture_default_str()
      ->check(CLI::IsMember({"milestone", "speedup", "log-speedup"}));
  app.add_option("--margin", options.settings.margin,
                 "Time that must be saved over a baseline to count as faster (fraction)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--baseline", options.settings.baseline,
                 "Baseline of the speedup forms: compile or eager")
      ->capture_default_str()
      ->check(CLI::IsMember({"compile", "eager"}));
  app.add_option("--fail-value", options.settings.fail_value,
                 "Reward of a failed candidate in the speedup forms (milestone: -1)")
      ->capture_default_str();
  app.add_flag("--trusted-code", options.settings.trusted_code, "Score profiles timed with more "
               "than one forward per call (a candidate's first forward could compute the later "
               "ones: for code you trust, never for a policy's)");
  app.add_flag("--summary", options.summary, "Report on scored records instead of scoring: pass "
               "rate, fast_p, geometric-mean speedups, reward histogram, per-level table");
  app.add_flag("--summary-json", options.summary_json, "The report's figures as one JSON object");
  app.add_option("--plots", options.plots, "Also write the report's SVG plots into DIR")
      ->type_name("DIR");
  app.add_option("--export-kernelbench", options.export_kernelbench, "Write scored records of "
                 "KernelBench tasks in KernelBench's result form into DIR")->type_name("DIR");
  app.add_option("--merge", options.merge, "Copy every result of each STORE (a shard's) into "
                 "--db, keeping what --db has; reads no records")
      ->type_name("STORE")
      ->check(CLI::ExistingFile);
  app.callback([&options] {
    if (options.merge.empty()) return;
    if (options.common.db.empty()) throw CLI::ValidationError("--merge", "needs --db, the store to merge into");
    if (!options.common.inputs.empty()) throw CLI::ValidationError("--merge", "reads no records: give no INPUT");
  });
}

Result<StageEnd> run_reward(RewardOptions& options, Session& session) {
  if (!options.merge.empty()) return run_merge(options, session);
  if (options.summary || options.summary_json || !options.plots.empty() ||
      !options.export_kernelbench.empty()) {
    return run_report(options, session);
  }
  options.settings.form = parse_reward_form(options.form).value_or(RewardForm::kMilestone);
  std::optional<ResultStore> store;
  if (!options.common.db.empty()) {
    auto opened = ResultStore::open(options.common.db);
    if (!opened) return opened.status();
    store.emplace(std::move(opened).value());
  }
  RewardStage stage(options.settings, store ? &*store : nullptr);
  return run_record_stage(stage, options.common, session);
}

}  // namespace cudaagent
