// `cudaagent-train logprobs` (a record stage over CausalLm::score_next_tokens) and `bench` (the
// training computation timed: chunked log-probabilities of every position, summed, backward).
// Bench waits for the device by reading a gradient back to the host, which needs no CUDA headers:
// the copy is ordered after every kernel of the backward pass on the stream.
#include <CLI/CLI.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/records/record_stage.h"
#include "cudaagent/train/causal_lm.h"
#include "cudaagent/train/commands.h"

namespace cudaagent::train {
namespace {

class LogprobsStage : public RecordStage {
 public:
  LogprobsStage(const CausalLm& model, const LogprobsOptions& options) : model_(model), options_(options) {}
  std::string_view key() const override { return "logprobs"; }

  RecordEdit process(const InputRecord& record) override {
    simdjson::dom::array list;
    if (record.object["ids"].get(list) != simdjson::SUCCESS) return RecordEdit::error("the record has no 'ids' list");
    std::vector<std::int64_t> ids;
    for (simdjson::dom::element item : list) {
      std::int64_t id = 0;
      if (item.get(id) != simdjson::SUCCESS || id < 0 || id >= model_.config().vocab_size) {
        return RecordEdit::error("'ids' must hold token ids below the vocabulary size");
      }
      ids.push_back(id);
    }
    if (ids.empty()) return RecordEdit::error("'ids' is empty");
    ScoreOptions score;
    score.temperature = options_.temperature;
    score.chunk_tokens = options_.chunk_tokens;
    TokenScores scores;
    try {
      at::InferenceMode inference;
      scores = model_.score_next_tokens(at::tensor(ids, at::kLong).view({1, -1}), score);
      scores.logprobs = scores.logprobs.to(at::kCPU).contiguous();
      scores.entropy = scores.entropy.to(at::kCPU).contiguous();
    } catch (const std::exception& error) {
      return RecordEdit::error(std::string("scoring failed: ") + error.what());
    }
    std::string out;
    JsonWriter w(out);
    w.begin_object().field("dtype", model_.dtype() == at::kBFloat16 ? "bfloat16" : model_.dtype() == at::kHalf ? "float16" : "float32");
    for (const auto& [name, tensor] : {std::pair<const char*, const at::Tensor*>{"token_logprobs", &scores.logprobs},
                                       {"entropy", &scores.entropy}}) {
      w.key(name).begin_array();
      const float* data = tensor->data_ptr<float>();
      for (std::int64_t i = 0; i < tensor->numel(); ++i) w.value(static_cast<double>(data[i]));
      w.end_array();
    }
    w.end_object();
    return RecordEdit::set_key(out);
  }

 private:
  const CausalLm& model_;
  const LogprobsOptions& options_;
};

void add_model_flags(CLI::App& command, std::string& model, std::string& device, std::string& dtype) {
  command.add_option("--model", model, "Checkpoint directory")->required()->type_name("DIR");
  command.add_option("--device", device, "Torch device: cpu, cuda, cuda:N")->capture_default_str();
  command.add_option("--dtype", dtype, "float32, bfloat16, float16, or auto (the checkpoint's)")->capture_default_str();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

}  // namespace

CLI::App* add_logprobs_command(CLI::App& app, LogprobsOptions& options, CommonOptions& common) {
  CLI::App* command = app.add_subcommand("logprobs", "Per-token log-probabilities and entropies of records' token ids");
  add_model_flags(*command, options.model, options.device, options.dtype);
  command->add_option("--temperature", options.temperature, "Score softmax(logits / temperature)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--chunk-tokens", options.chunk_tokens, "Positions whose logits exist at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_common_flags(*command, common);
  return command;
}

Result<StageEnd> run_logprobs(const LogprobsOptions& options, const CommonOptions& common, Session& session) {
  ModelOptions model_options;
  model_options.device = options.device;
  model_options.dtype = options.dtype;
  auto model = CausalLm::load(options.model, model_options);
  if (!model) return model.status();
  LogprobsStage stage(*model.value(), options);
  return run_record_stage(stage, common, session);
}

CLI::App* add_bench_command(CLI::App& app, BenchOptions& options, CommonOptions& common) {
  CLI::App* command = app.add_subcommand("bench", "Time forward + backward of the training computation");
  add_model_flags(*command, options.model, options.device, options.dtype);
  command->add_option("--batch", options.batch, "Sequences per step")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--seq-len", options.seq_len, "Tokens per sequence")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  command->add_option("--steps", options.steps, "Timed steps")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--warmup", options.warmup, "Untimed steps first")->capture_default_str()->check(CLI::NonNegativeNumber);
  command->add_flag("--recompute", options.recompute, "Recompute each layer's activations in the backward pass");
  command->add_option("--chunk-tokens", options.chunk_tokens, "Positions whose logits exist at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("-q,--quiet", common.quiet, "No messages on stderr but errors");
  return command;
}

Result<StageEnd> run_bench(const BenchOptions& options, Session& session) {
  ModelOptions model_options;
  model_options.device = options.device;
  model_options.dtype = options.dtype;
  model_options.trainable = true;
  auto loaded = CausalLm::load(options.model, model_options);
  if (!loaded) return loaded.status();
  const CausalLm& model = *loaded.value();
  std::int64_t parameters = 0;
  for (const at::Tensor& p : model.parameters()) parameters += p.numel();
  at::manual_seed(0);
  const auto ids = at::randint(0, model.config().vocab_size, {options.batch, options.seq_len}, at::kLong).to(model.device());
  ScoreOptions score;
  score.entropy = true;
  score.forward.recompute = options.recompute;
  score.chunk_tokens = options.chunk_tokens;
  const at::Tensor probe = model.parameters().front();
  std::vector<double> seconds;
  for (int step = 0; step < options.warmup + options.steps && session.stop_signal.load() == 0; ++step) {
    for (at::Tensor p : model.parameters()) p.mutable_grad() = at::Tensor();
    const auto start = std::chrono::steady_clock::now();
    const TokenScores s = model.score_next_tokens(ids, score);
    (s.logprobs.sum() + 0.01 * s.entropy.sum()).backward();
    (void)probe.grad().sum().item<double>();  // waits for the device
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (step >= options.warmup) seconds.push_back(took.count());
    session.log.info("step " + std::to_string(step + 1) + ": " + std::to_string(took.count()) + " s");
  }
  const double per_step = median(seconds);
  const auto tokens = static_cast<double>(options.batch * options.seq_len);
  std::string out;
  JsonWriter w(out);
  w.begin_object().key("bench").begin_object().field("model", options.model).field("device", options.device);
  w.field("dtype", model.dtype() == at::kBFloat16 ? "bfloat16" : model.dtype() == at::kHalf ? "float16" : "float32");
  w.field("batch", options.batch).field("seq_len", options.seq_len).field("recompute", options.recompute);
  w.field("chunk_tokens", options.chunk_tokens).field("parameters", parameters);
  w.key("seconds").begin_array();
  for (const double s : seconds) w.value(s);
  w.end_array().field("median_seconds", per_step).field("tokens_per_second", per_step > 0 ? tokens / per_step : 0.0);
  w.end_object().end_object();
  out.push_back('\n');
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return StageEnd::kCompleted;
}

}  // namespace cudaagent::train
