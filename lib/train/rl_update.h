// Private to lib/train: the machinery the three trainers share — minibatch plans, micro-batch
// loops over a rank's share, statistics summed per minibatch and reduced across ranks, and the
// data and timing metrics of a batch.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cudaagent/train/rl_batch.h"
#include "cudaagent/train/rl_metrics.h"
#include "cudaagent/train/rl_optim.h"
#include "cudaagent/train/rl_ppo.h"

namespace cudaagent {

// The minibatches of one pass: rows in order (or shuffled with a seed of the iteration and the
// pass), cut into slices of mini_batch_size.
std::vector<std::vector<std::int64_t>> minibatches(std::int64_t rows, const Batching& batching,
                                                   std::int64_t iteration, int epoch);

// The minibatch's token and row counts, the denominators of its losses.
LossNormaliser minibatch_normaliser(const RlBatch& batch, const std::vector<std::int64_t>& rows);

// Calls `body` with each micro-batch of this rank's share of `rows`, on `device`.
void for_each_micro_batch(const RlBatch& batch, const std::vector<std::int64_t>& rows,
                          std::int64_t micro_batch_size, const Communicator& communicator,
                          c10::Device device, const std::function<void(const RlBatch&)>& body);

// Per-minibatch statistics: sums (loss terms already normalised by the minibatch, and token-
// weighted numerators) and maxima, reduced across ranks in one collective each. The key lists are
// fixed up front so every rank reduces the same vector, even a rank whose share was empty.
class UpdateSums {
 public:
  UpdateSums(std::vector<std::string> sum_keys, std::vector<std::string> max_keys);
  void add(const std::string& name, double value);  // name must be a sum key
  void max(const std::string& name, double value);  // name must be a max key
  void reduce(Communicator& communicator);
  double sum(const std::string& name) const;
  double maximum(const std::string& name) const;
  const std::vector<std::string>& sum_keys() const { return sum_keys_; }

 private:
  std::vector<std::string> sum_keys_;
  std::vector<std::string> max_keys_;
  std::vector<double> sums_;
  std::vector<double> maxima_;
};

// Statistics over the minibatches of an iteration.
class UpdateTotals {
 public:
  void add_minibatch(const UpdateSums& sums, const StepReport& report);
  // Appends `mean_keys` as means over minibatches, `token_keys` as token-weighted means (over the
  // "tokens" sum), and "<prefix>/grad_norm" (mean), "<prefix>/lr" (last) and
  // "<prefix>/skipped_steps". Nothing when no minibatch ran.
  void append(MetricList& metrics, const std::string& prefix,
              const std::vector<std::string>& mean_keys,
              const std::vector<std::string>& token_keys) const;

 private:
  int minibatches_ = 0;
  std::map<std::string, double> sums_;
  double grad_norm_sum_ = 0;
  double lr_ = 0;
  int skipped_ = 0;
};

// critic/score, critic/rewards, critic/advantages, critic/returns, critic/values (mean, max, min
// over trainable tokens) and response_length, as veRL's data metrics.
void append_data_metrics(const RlBatch& batch, const at::Tensor& token_rewards,
                         MetricList& metrics);

// perf/time_s, perf/tokens (prompt and response tokens of the batch), perf/tokens_per_s.
void append_time_metrics(const RlBatch& batch, std::chrono::steady_clock::time_point started,
                         MetricList& metrics);

}  // namespace cudaagent
