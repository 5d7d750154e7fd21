// The reward stage: decisions from lib/reward/reward.cpp, records through the shared driver, and the
// optional store. A stored reward is keyed by the content the decision read (verify and profile,
// minified), the settings and the reward code's version, so a re-run with the same inputs and
// settings takes the stored value and a change to any of them scores afresh.
#include "cudaagent/reward/stage.h"

#include <optional>
#include <vector>

#include "cudaagent/base/sha256.h"
#include "cudaagent/records/record_stage.h"
#include "cudaagent/records/result_store.h"

namespace cudaagent {
namespace {

// Bump when the decision rules change, so stored rewards from older rules are not reused.
constexpr std::string_view kRewardRulesVersion = "reward-rules-1";

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
    hash.add_part(std::to_string(settings_.fail_value)).add_part(record.id);
    for (std::string_view key : {"verify", "profile"}) {
      simdjson::dom::element value;
      hash.add_part(record.object[key].get(value) ? std::string("<absent>")
                                                   : simdjson::minify(value));
    }
    return hash.hex_digest();
  }

  const RewardSettings& settings_;
  ResultStore* store_;
  std::vector<StoredResult> pending_;
};

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
}

Result<StageEnd> run_reward(RewardOptions& options, Session& session) {
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
