// The RL subcommands: read the trajectories through the shared record driver, set up ranks,
// models and trainers (or restore them from the run's newest checkpoint), then iterate over the
// data, writing metrics and checkpoints. The iteration loop is one function for the three stages;
// each stage supplies its models, its trainer and what it checkpoints.
#include "cudaagent/train/rl_run.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>

#include "cudaagent/base/files.h"
#include "cudaagent/records/record_sink.h"
#include "cudaagent/records/record_stage.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/train/causal_lm.h"
#include "cudaagent/train/rl_checkpoint.h"
#include "cudaagent/train/rl_dist.h"
#include "cudaagent/train/rl_metrics.h"
#include "cudaagent/train/rl_models.h"
#include "cudaagent/train/rl_ppo.h"
#include "cudaagent/train/rl_trajectory.h"

namespace cudaagent {
namespace {

// Collects the usable trajectories of the input and hashes every well-formed record, in order.
class TrajectoryCollector final : public RecordStage {
 public:
  TrajectoryCollector(TrajectoryReadOptions read,
                      std::function<std::string(const Trajectory&)> reject)
      : read_(read), reject_(std::move(reject)) {}
  std::string_view key() const override { return "train"; }
  RecordEdit process(const InputRecord& record) override {
    hash_.add_part(record.text);
    auto trajectory = read_trajectory(record.object, read_);
    if (!trajectory) return RecordEdit::error(trajectory.status().message());
    if (reject_) {
      std::string reason = reject_(trajectory.value());
      if (!reason.empty()) {
        // Tallied by kind: the reason up to its first number or colon ("reward", "tool-call loop").
        std::string kind = reason.substr(0, reason.find_first_of(":0123456789"));
        while (!kind.empty() && kind.back() == ' ') kind.pop_back();
        ++rejected_[kind];
        return RecordEdit::drop();
      }
    }
    trajectories_.push_back(std::move(trajectory.value()));
    return RecordEdit::drop();
  }
  std::vector<Trajectory> take() { return std::move(trajectories_); }
  std::string fingerprint() { return hash_.hex_digest(); }
  const std::map<std::string, std::uint64_t>& rejected() const { return rejected_; }

 private:
  TrajectoryReadOptions read_;
  std::function<std::string(const Trajectory&)> reject_;
  std::vector<Trajectory> trajectories_;
  std::map<std::string, std::uint64_t> rejected_;
  Sha256 hash_;
};

struct Dataset {
  std::vector<Trajectory> trajectories;
  std::string fingerprint;
};

Result<Dataset> load_dataset(const RlRunOptions& options, const Communicator& communicator,
                             const TrajectoryReadOptions& read,
                             std::function<std::string(const Trajectory&)> reject,
                             Session& session) {
  TrajectoryCollector collector(read, std::move(reject));
  CommonOptions common = options.common;
  common.shard = ShardSpec{};  // every rank reads everything; ranks split batches, not inputs
  common.jobs = 1;
  if (communicator.rank() != 0) {  // one rank speaks for all
    common.output = "/dev/null";
    common.errors.clear();
    common.quiet = true;
  } else {
    common.output = "-";
  }
  StageCounts counts;
  auto end = run_record_stage(collector, common, session, &counts);
  if (!end) return end.status();
  // A stop signal while reading leaves a partial dataset: train on none of it (run_tool exits
  // 128+N whatever this says).
  if (session.stop_signal.load() != 0) return Status::error("stopped while reading the input");
  Dataset dataset{collector.take(), collector.fingerprint()};
  if (communicator.rank() == 0 && !options.common.quiet) {
    std::string summary = std::to_string(dataset.trajectories.size()) +
                          " trajectories to train on, " +
                          std::to_string(counts.stage_errors + counts.bad_lines) + " unusable";
    for (const auto& [reason, count] : collector.rejected()) {
      summary += ", " + std::to_string(count) + " dropped (" + reason + ")";
    }
    session.log.info(summary);
  }
  if (dataset.trajectories.empty()) return Status::error("no trajectory to train on");
  return dataset;
}

// The metrics of a run: stdout (rank 0) and RUN/metrics.jsonl, cut back to the checkpoint's length
// on resume so that a resumed run's file is the same as an uninterrupted one's.
class MetricsOutput {
 public:
  static Result<MetricsOutput> open(const std::string& run_directory, std::uint64_t keep_bytes,
                                    bool active) {
    MetricsOutput out;
    out.path_ = run_directory + "/metrics.jsonl";
    out.svg_path_ = run_directory + "/metrics.svg";
    if (!active) return out;
    if (::truncate(out.path_.c_str(), static_cast<off_t>(keep_bytes)) != 0 && keep_bytes != 0) {
      return Status::error("cannot cut " + cudaagent::quoted(out.path_) +
                           " back to its checkpoint");
    }
    out.file_ = std::fopen(out.path_.c_str(), "ab");
    if (out.file_ == nullptr) return Status::error("cannot open " + cudaagent::quoted(out.path_));
    auto sink = RecordSink::open("-");
    if (!sink) return sink.status();
    out.stdout_.emplace(std::move(sink.value()));
    return out;
  }
  MetricsOutput() = default;
  MetricsOutput(MetricsOutput&& other) noexcept { *this = std::move(other); }
  MetricsOutput& operator=(MetricsOutput&& other) noexcept {
    std::swap(file_, other.file_);
    path_ = other.path_;
    svg_path_ = other.svg_path_;
    stdout_ = std::move(other.stdout_);
    return *this;
  }
  ~MetricsOutput() {
    if (file_ != nullptr) std::fclose(file_);
  }

  // Writes one record; false when stdout's reader went away.
  Result<bool> write(std::string_view stage, std::int64_t iteration, std::int64_t epoch,
                     const MetricList& metrics) {
    if (file_ == nullptr) return true;
    std::string line;
    append_metrics_record(line, stage, iteration, metrics, epoch);
    if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
      return Status::error("cannot write " + cudaagent::quoted(path_));
    }
    if (auto status = stdout_->write(line); !status) {
      if (stdout_->pipe_closed()) return false;
      return status;
    }
    if (auto status = stdout_->flush(); !status) {
      if (stdout_->pipe_closed()) return false;
      return status;
    }
    return true;
  }
  std::uint64_t bytes() const {
    return file_ == nullptr ? 0 : static_cast<std::uint64_t>(std::ftell(file_));
  }
  // Redraws RUN/metrics.svg from the whole metrics file.
  void plot(std::string_view title) const {
    if (file_ == nullptr) return;
    std::string text;
    if (!read_whole_file(path_, text)) return;
    std::vector<MetricSeries> shown;
    for (auto& series : metric_series_from_jsonl(text)) {
      const std::string& name = series.name;
      // Extremes, timings, settings and counters would crowd out the curves that tell the story.
      const bool hidden = name.ends_with("/max") || name.ends_with("/min") ||
                          name.ends_with("/lr") || name.ends_with("/skipped_steps") ||
                          name.rfind("perf/", 0) == 0 || name.rfind("batch/", 0) == 0 ||
                          name == "epoch";
      if (!hidden) shown.push_back(std::move(series));
    }
    (void)write_file_atomically(svg_path_, render_metrics_svg(shown, title));
  }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string svg_path_;
  std::optional<RecordSink> stdout_;
};

// What a stage gives the shared loop.
struct StageParts {
  std::string stage;
  std::function<MetricList(const std::vector<const Trajectory*>&, std::int64_t)> iterate;
  CheckpointParts checkpoint;
  std::function<void(RunState&)> before_checkpoint;  // copies trainer state into the RunState
};

struct RunSetup {
  RankInfo rank;
  std::unique_ptr<Communicator> communicator;
  c10::Device device{c10::kCPU};
  c10::ScalarType compute = c10::kFloat;  // the models' compute dtype (state.compute_dtype)
  std::optional<std::string> resume;      // the checkpoint directory to resume from
  RunState state;
};

// The run's compute dtype: a resumed run keeps its checkpoint's (a different explicit
// --compute-dtype is refused rather than silently changing the numerics of a run half done);
// a new run takes the flag's, auto meaning bfloat16 for a causal LM on CUDA (the tensor cores'
// rate; float32 products run several times slower there) and float32 otherwise (the CPU has no
// fast bfloat16 products, and the toy model computes in float32 only).
Status settle_compute_dtype(const RlRunOptions& options, const std::string& model_spec,
                            RunSetup& setup) {
  std::string name = options.compute_dtype;
  if (setup.resume) {
    if (name != "auto" && name != setup.state.compute_dtype) {
      return Status::error("the run computes in " + setup.state.compute_dtype +
                           "; --compute-dtype " + name + " cannot change that when resuming");
    }
    name = setup.state.compute_dtype;
  } else if (name == "auto") {
    name = setup.device.is_cuda() && !is_toy_model(model_spec) ? "bfloat16" : "float32";
  }
  auto dtype = train::parse_compute_dtype(name);
  if (!dtype) return dtype.status();
  setup.compute = dtype.value();
  setup.state.compute_dtype = compute_dtype_name(setup.compute);
  return Status::ok();
}

Result<RunSetup> set_up(RlRunOptions& options, const std::string& stage, Session& session) {
  RunSetup setup;
  session.log.set_quiet(options.common.quiet);
  if (options.threads > 0) at::set_num_threads(options.threads);
  auto device = parse_device(options.device);
  if (!device) return device.status();
  setup.device = device.value();
  auto rank = rank_from_environment([](const char* name) { return std::getenv(name); });
  if (!rank) return rank.status();
  setup.rank = rank.value();
  if (setup.device.is_cuda() && !setup.device.has_index()) {
    const int visible = static_cast<int>(torch::cuda::device_count());
    setup.device = c10::Device(c10::kCUDA,
                               static_cast<c10::DeviceIndex>(cuda_device_for(setup.rank.local_rank, visible)));
  }
  if (setup.device.is_cuda()) setup.rank.cuda_device = setup.device.index();
  const std::string backend = !options.backend.empty() ? options.backend
                              : setup.device.is_cuda() ? "nccl"
                                                       : "gloo";
  auto communicator = connect_communicator(
      setup.rank, backend,
      std::chrono::milliseconds(static_cast<std::int64_t>(options.dist_timeout_s * 1000)));
  if (!communicator) return communicator.status();
  setup.communicator = std::move(communicator.value());
  if (setup.rank.rank != 0) session.log.set_quiet(true);
  if (!make_directories(options.run_directory, 0755)) {
    return Status::error("cannot create " + cudaagent::quoted(options.run_directory));
  }
  setup.state.stage = stage;
  setup.state.seed = options.seed;
  setup.state.world_size = setup.rank.world_size;
  setup.resume = latest_checkpoint(options.run_directory);
  if (setup.resume) {
    auto state = read_run_state(*setup.resume);
    if (!state) return state.status();
    if (state.value().stage != stage) {
      return Status::error(cudaagent::quoted(options.run_directory) + " holds a " +
                           state.value().stage + " run, not " + stage);
    }
    if (state.value().world_size != setup.rank.world_size) {
      return Status::error("the checkpoint was written by " +
                           std::to_string(state.value().world_size) + " ranks; this run has " +
                           std::to_string(setup.rank.world_size));
    }
    setup.state = state.value();
    if (auto status = restore_generator(*setup.resume, *setup.communicator); !status) return status;
    session.log.info("resuming " + cudaagent::quoted(*setup.resume) + " at iteration " +
                     std::to_string(setup.state.iteration));
  }
  const std::string& model_spec = stage == "value" ? options.critic : options.model;
  if (auto status = settle_compute_dtype(options, model_spec, setup); !status) return status;
  if (setup.compute != c10::kFloat) {
    session.log.info("computing in " + setup.state.compute_dtype +
                     " (float32 weights and optimiser state)");
  }
  return setup;
}

// The model spec to load: the checkpoint's copy when resuming, the command line's otherwise.
std::string model_source(const RunSetup& setup, const std::string& name, const std::string& spec) {
  return setup.resume ? *setup.resume + "/" + name : spec;
}

Status settle_settings(RlRunOptions& options) {
  auto aggregation = parse_loss_aggregation(options.loss_aggregation);
  if (!aggregation) return aggregation.status();
  options.ppo.policy.aggregation = aggregation.value();
  auto kl_loss = parse_kl_estimator(options.kl_loss_type);
  if (!kl_loss) return kl_loss.status();
  options.ppo.kl_loss_type = kl_loss.value();
  auto kl_penalty_type = parse_kl_estimator(options.kl_penalty);
  if (!kl_penalty_type) return kl_penalty_type.status();
  options.ppo.kl_reward_type = kl_penalty_type.value();
  if (options.ppo.policy.clip_c <= 1.0) return Status::error("--clip-ratio-c must be above 1");
  options.ppo.whiten_advantages = !options.no_whiten;
  options.ppo.recompute_old_log_probs = options.old_log_probs == "recompute";
  options.ppo.batching.seed = options.seed;
  // The shared optimiser flags land in the actor's settings; the critic's follow them.
  auto& critic = options.ppo.critic_optimizer;
  const auto& shared = options.ppo.actor_optimizer;
  critic.weight_decay = shared.weight_decay;
  critic.grad_clip = shared.grad_clip;
  critic.warmup_steps = shared.warmup_steps;
  critic.bucket_bytes = shared.bucket_bytes;
  return Status::ok();
}

Result<StageEnd> iterate(RlRunOptions& options, Session& session, RunSetup& setup, Dataset& data,
                         StageParts& parts) {
  Communicator& communicator = *setup.communicator;
  RunState& state = setup.state;
  if (state.data_fingerprint != data.fingerprint) {
    if (setup.resume) session.log.info("new input data: starting at its first trajectory");
    state.data_fingerprint = data.fingerprint;
    state.epoch = 0;
    state.position = 0;
  }
  auto metrics = MetricsOutput::open(options.run_directory, setup.resume ? state.metrics_bytes : 0,
                                     communicator.rank() == 0);
  if (!metrics) return metrics.status();
  const auto count = static_cast<std::int64_t>(data.trajectories.size());
  std::int64_t done_here = 0;
  std::int64_t since_checkpoint = 0;
  StageEnd end = StageEnd::kCompleted;
  auto checkpoint = [&]() -> Status {
    if (parts.before_checkpoint) parts.before_checkpoint(state);
    state.metrics_bytes = metrics.value().bytes();
    auto written = write_checkpoint(options.run_directory, state, parts.checkpoint, communicator,
                                    options.keep_checkpoints);
    if (!written) return written.status();
    metrics.value().plot("cudaagent-train " + parts.stage);
    since_checkpoint = 0;
    return Status::ok();
  };
  while (state.epoch < options.data_epochs) {
    // Every rank stops together: a signal to any rank stops all after this iteration.
    std::vector<at::Tensor> stop{at::full({1}, session.stop_signal.load() != 0 ? 1.0 : 0.0,
                                          at::TensorOptions().dtype(at::kFloat))
                                     .to(communicator.device())};
    communicator.all_reduce_max(stop);
    if (stop[0].item<double>() > 0 || (options.stop_after > 0 && done_here >= options.stop_after))
      break;
    if (state.position >= count) {
      ++state.epoch;
      state.position = 0;
      continue;
    }
    std::vector<std::int64_t> order(static_cast<std::size_t>(count));
    if (options.shuffle_data) {
      order = permutation(
          count, mix_seed(state.seed, 0x64617461ULL, static_cast<std::uint64_t>(state.epoch)));
    } else {
      std::iota(order.begin(), order.end(), std::int64_t{0});
    }
    std::vector<const Trajectory*> batch;
    for (std::int64_t i = state.position; i < std::min(count, state.position + options.batch_size);
         ++i) {
      batch.push_back(
          &data.trajectories[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])]);
    }
    MetricList values = parts.iterate(batch, state.iteration);
    // The precision travels with every record, so curves of runs in different dtypes are told
    // apart without the checkpoint.
    values.emplace_back("perf/compute_bfloat16", setup.compute == c10::kBFloat16 ? 1.0 : 0.0);
    const std::int64_t epoch = state.epoch;
    state.position += static_cast<std::int64_t>(batch.size());
    ++state.iteration;
    ++done_here;
    ++since_checkpoint;
    auto written = metrics.value().write(parts.stage, state.iteration, epoch, values);
    if (!written) return written.status();
    if (!written.value()) end = StageEnd::kPipeClosed;
    if (options.save_every > 0 && state.iteration % options.save_every == 0) {
      if (auto status = checkpoint(); !status) return status;
    }
    if (end == StageEnd::kPipeClosed) break;
  }
  if (since_checkpoint > 0 || !setup.resume) {
    if (auto status = checkpoint(); !status) return status;
  }
  return end;
}

TrajectoryReadOptions read_options(bool log_probs, std::int64_t vocab) {
  TrajectoryReadOptions read;
  read.need_log_probs = log_probs;
  read.vocab_size = vocab;
  return read;
}

}  // namespace

Result<StageEnd> run_rft(RlRunOptions& options, Session& session) {
  if (auto status = settle_settings(options); !status) return status;
  auto setup = set_up(options, "rft", session);
  if (!setup) return setup.status();
  RunSetup& run = setup.value();
  auto model =
      load_policy_model(model_source(run, "actor", options.model), run.device, run.compute);
  if (!model) return model.status();
  RftSettings settings;
  settings.aggregation = options.ppo.policy.aggregation;
  settings.batching = options.ppo.batching;
  settings.batching.mini_batch_size = 0;
  settings.batching.epochs = 1;
  settings.optimizer = options.ppo.actor_optimizer;
  RftTrainer trainer(*model.value(), settings, *run.communicator);
  if (run.resume) {
    if (auto status =
            restore_optimizer(*run.resume, "actor", trainer.optimizer(), *run.communicator);
        !status) {
      return status;
    }
  }
  RftFilter filter = options.rft_filter;
  filter.drop_invalid_calls = !options.keep_invalid_calls;
  TrajectoryReadOptions read = read_options(false, model.value()->vocab_size());
  read.read_tool_calls = true;
  auto data = load_dataset(
      options, *run.communicator, read,
      [filter](const Trajectory& t) { return rft_rejection(t, filter); }, session);
  if (!data) return data.status();
  StageParts parts;
  parts.stage = "rft";
  parts.iterate = [&](const std::vector<const Trajectory*>& batch, std::int64_t iteration) {
    return trainer.iteration(batch, iteration);
  };
  parts.checkpoint.models = {{"actor", model.value().get()}};
  parts.checkpoint.optimizers = {{"actor", &trainer.optimizer()}};
  return iterate(options, session, run, data.value(), parts);
}

Result<StageEnd> run_value(RlRunOptions& options, Session& session) {
  if (auto status = settle_settings(options); !status) return status;
  auto setup = set_up(options, "value", session);
  if (!setup) return setup.status();
  RunSetup& run = setup.value();
  auto critic =
      load_value_model(model_source(run, "critic", options.critic), run.device, run.compute);
  if (!critic) return critic.status();
  ValueSettings settings;
  settings.gamma = options.ppo.gamma;
  settings.lambda = options.ppo.lambda;
  settings.cliprange_value = options.ppo.cliprange_value;
  settings.aggregation = options.ppo.policy.aggregation;
  settings.batching = options.ppo.batching;
  settings.batching.mini_batch_size = 0;
  settings.batching.epochs = 1;
  settings.optimizer = options.ppo.actor_optimizer;
  ValueTrainer trainer(*critic.value(), settings, *run.communicator);
  if (run.resume) {
    if (auto status =
            restore_optimizer(*run.resume, "critic", trainer.optimizer(), *run.communicator);
        !status) {
      return status;
    }
  }
  auto data = load_dataset(options, *run.communicator,
                           read_options(false, critic.value()->vocab_size()), nullptr, session);
  if (!data) return data.status();
  StageParts parts;
  parts.stage = "value";
  parts.iterate = [&](const std::vector<const Trajectory*>& batch, std::int64_t iteration) {
    return trainer.iteration(batch, iteration);
  };
  parts.checkpoint.models = {{"critic", critic.value().get()}};
  parts.checkpoint.optimizers = {{"critic", &trainer.optimizer()}};
  return iterate(options, session, run, data.value(), parts);
}

Result<StageEnd> run_ppo(RlRunOptions& options, Session& session) {
  if (auto status = settle_settings(options); !status) return status;
  auto setup = set_up(options, "ppo", session);
  if (!setup) return setup.status();
  RunSetup& run = setup.value();
  auto actor =
      load_policy_model(model_source(run, "actor", options.model), run.device, run.compute);
  if (!actor) return actor.status();
  auto critic =
      load_value_model(model_source(run, "critic", options.critic), run.device, run.compute);
  if (!critic) return critic.status();
  if (!run.resume)
    run.state.reference_spec = options.reference.empty() ? options.model : options.reference;
  std::unique_ptr<PolicyModel> reference;
  if (options.ppo.needs_reference()) {
    auto loaded = load_policy_model(run.state.reference_spec, run.device, run.compute);
    if (!loaded) return loaded.status().with_context("reference model");
    reference = std::move(loaded.value());
  }
  PpoTrainer trainer(*actor.value(), *critic.value(), reference.get(), options.ppo,
                     *run.communicator);
  if (run.resume) {
    for (auto [name, optimizer] : {std::pair{"actor", &trainer.actor_optimizer()},
                                   std::pair{"critic", &trainer.critic_optimizer()}}) {
      if (auto status = restore_optimizer(*run.resume, name, *optimizer, *run.communicator);
          !status) {
        return status;
      }
    }
    trainer.kl_controller().value = run.state.kl_coef;
  }
  auto data =
      load_dataset(options, *run.communicator,
                   read_options(!options.ppo.recompute_old_log_probs, actor.value()->vocab_size()),
                   nullptr, session);
  if (!data) return data.status();
  StageParts parts;
  parts.stage = "ppo";
  parts.iterate = [&](const std::vector<const Trajectory*>& batch, std::int64_t iteration) {
    return trainer.iteration(batch, iteration);
  };
  parts.checkpoint.models = {{"actor", actor.value().get()}, {"critic", critic.value().get()}};
  parts.checkpoint.optimizers = {{"actor", &trainer.actor_optimizer()},
                                 {"critic", &trainer.critic_optimizer()}};
  parts.before_checkpoint = [&](RunState& state) { state.kl_coef = trainer.kl_controller().value; };
  return iterate(options, session, run, data.value(), parts);
}

}  // namespace cudaagent
