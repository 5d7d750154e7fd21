// Shared trainer machinery (see rl_update.h).
#include "rl_update.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace cudaagent {
namespace {

std::size_t key_index(const std::vector<std::string>& keys, const std::string& name) {
  auto found = std::find(keys.begin(), keys.end(), name);
  if (found == keys.end()) throw std::logic_error("undeclared statistic '" + name + "'");
  return static_cast<std::size_t>(found - keys.begin());
}

void append_stats(MetricList& metrics, const std::string& name, const at::Tensor& values,
                  const at::Tensor& mask) {
  at::Tensor selected = values.masked_select(mask.gt(0));
  if (selected.numel() == 0) return;
  metrics.emplace_back(name + "/mean", selected.mean().item<double>());
  metrics.emplace_back(name + "/max", selected.max().item<double>());
  metrics.emplace_back(name + "/min", selected.min().item<double>());
}

}  // namespace

std::vector<std::vector<std::int64_t>> minibatches(std::int64_t rows, const Batching& batching,
                                                   std::int64_t iteration, int epoch) {
  std::vector<std::int64_t> order;
  if (batching.shuffle) {
    order = permutation(rows, mix_seed(batching.seed, static_cast<std::uint64_t>(iteration),
                                       static_cast<std::uint64_t>(epoch)));
  } else {
    order.resize(static_cast<std::size_t>(rows));
    std::iota(order.begin(), order.end(), std::int64_t{0});
  }
  return split_rows(order, batching.mini_batch_size);
}

LossNormaliser minibatch_normaliser(const RlBatch& batch, const std::vector<std::int64_t>& rows) {
  at::Tensor index = at::tensor(rows, at::TensorOptions().dtype(at::kLong));
  LossNormaliser normaliser;
  normaliser.tokens = batch.mask.index_select(0, index).sum().item<double>();
  normaliser.rows = static_cast<double>(rows.size());
  return normaliser;
}

void for_each_micro_batch(const RlBatch& batch, const std::vector<std::int64_t>& rows,
                          std::int64_t micro_batch_size, const Communicator& communicator,
                          c10::Device device, const std::function<void(const RlBatch&)>& body) {
  const auto mine = rank_share(rows, communicator.rank(), communicator.world_size());
  for (const auto& micro : split_rows(mine, micro_batch_size)) {
    body(to_device(select_rows(batch, micro), device));
  }
}

UpdateSums::UpdateSums(std::vector<std::string> sum_keys, std::vector<std::string> max_keys)
    : sum_keys_(std::move(sum_keys)),
      max_keys_(std::move(max_keys)),
      sums_(sum_keys_.size(), 0.0),
      maxima_(max_keys_.size(), 0.0) {}

void UpdateSums::add(const std::string& name, double value) {
  sums_[key_index(sum_keys_, name)] += value;
}

void UpdateSums::max(const std::string& name, double value) {
  double& slot = maxima_[key_index(max_keys_, name)];
  slot = std::max(slot, value);
}

void UpdateSums::reduce(Communicator& communicator) {
  if (communicator.world_size() == 1) return;
  auto exchange = [&](std::vector<double>& values, bool maximum) {
    if (values.empty()) return;
    std::vector<at::Tensor> shared{
        at::tensor(values, at::TensorOptions().dtype(at::kDouble)).to(communicator.device())};
    if (maximum) {
      communicator.all_reduce_max(shared);
    } else {
      communicator.all_reduce_sum(shared);
    }
    at::Tensor result = shared[0].to(at::kCPU).contiguous();
    std::copy(result.data_ptr<double>(), result.data_ptr<double>() + values.size(), values.begin());
  };
  exchange(sums_, false);
  exchange(maxima_, true);
}

double UpdateSums::sum(const std::string& name) const { return sums_[key_index(sum_keys_, name)]; }
double UpdateSums::maximum(const std::string& name) const {
  return maxima_[key_index(max_keys_, name)];
}

void UpdateTotals::add_minibatch(const UpdateSums& sums, const StepReport& report) {
  ++minibatches_;
  for (const auto& name : sums.sum_keys()) sums_[name] += sums.sum(name);
  grad_norm_sum_ += report.grad_norm;
  lr_ = report.lr;
  skipped_ += report.skipped ? 1 : 0;
}

void UpdateTotals::append(MetricList& metrics, const std::string& prefix,
                          const std::vector<std::string>& mean_keys,
                          const std::vector<std::string>& token_keys) const {
  if (minibatches_ == 0) return;
  auto total = [&](const std::string& name) {
    auto found = sums_.find(name);
    return found == sums_.end() ? 0.0 : found->second;
  };
  for (const auto& name : mean_keys) {
    if (sums_.count(name) != 0) metrics.emplace_back(name, total(name) / minibatches_);
  }
  const double tokens = total("tokens");
  for (const auto& name : token_keys) {
    if (sums_.count(name) != 0) {
      metrics.emplace_back(
          name, tokens > 0 ? total(name) / tokens : std::numeric_limits<double>::quiet_NaN());
    }
  }
  metrics.emplace_back(prefix + "/grad_norm", grad_norm_sum_ / minibatches_);
  metrics.emplace_back(prefix + "/lr", lr_);
  metrics.emplace_back(prefix + "/skipped_steps", skipped_);
}

void append_data_metrics(const RlBatch& batch, const at::Tensor& token_rewards,
                         MetricList& metrics) {
  at::Tensor scores = batch.scores;
  metrics.emplace_back("batch/trajectories", static_cast<double>(batch.rows()));
  metrics.emplace_back("critic/score/mean", scores.mean().item<double>());
  metrics.emplace_back("critic/score/max", scores.max().item<double>());
  metrics.emplace_back("critic/score/min", scores.min().item<double>());
  if (token_rewards.defined()) {
    metrics.emplace_back("critic/rewards/mean",
                         (token_rewards * batch.mask).sum(-1).mean().item<double>());
  }
  if (batch.advantages.defined())
    append_stats(metrics, "critic/advantages", batch.advantages, batch.mask);
  if (batch.returns.defined()) append_stats(metrics, "critic/returns", batch.returns, batch.mask);
  if (batch.values.defined()) append_stats(metrics, "critic/values", batch.values, batch.mask);
  const std::int64_t start = batch.tokens.response_start;
  at::Tensor response =
      batch.tokens.attention_mask.narrow(1, start, batch.tokens.response_length());
  at::Tensor lengths = response.sum(-1).to(at::kDouble);
  metrics.emplace_back("response_length/mean", lengths.mean().item<double>());
  metrics.emplace_back("response_length/max", lengths.max().item<double>());
  metrics.emplace_back("response_length/trainable_mean", batch.mask.sum(-1).mean().item<double>());
}

void append_time_metrics(const RlBatch& batch, std::chrono::steady_clock::time_point started,
                         MetricList& metrics) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double tokens = batch.tokens.attention_mask.sum().item<double>();
  metrics.emplace_back("perf/time_s", seconds);
  metrics.emplace_back("perf/tokens", tokens);
  metrics.emplace_back("perf/tokens_per_s", seconds > 0 ? tokens / seconds : 0.0);
}

}  // namespace cudaagent
