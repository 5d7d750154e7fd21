// The optimiser of the RL stages: AdamW with decoupled weight decay (torch.optim.AdamW's update,
// term for term), gradient clipping by global norm, a linear warm-up, and ZeRO-1 sharding: in a
// world of N ranks each parameter's moments live on one owner rank, which alone updates it and
// then broadcasts it. Written here rather than taken from torch::optim so that its state is plain
// named tensors (checkpoints, shards) and its arithmetic is the same on every torch version.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/train/rl_dist.h"
#include "cudaagent/train/rl_settings.h"
#include "cudaagent/train/rl_tensor_io.h"

namespace cudaagent {

struct StepReport {
  double grad_norm = 0.0;  // global norm before clipping
  double lr = 0.0;         // the rate this step used
  bool skipped = false;    // the norm was not finite: gradients dropped, parameters unchanged
};

class AdamW {
 public:
  // `parameters` and `names` in the model's order; the owner plan is made from their sizes.
  AdamW(std::vector<at::Tensor> parameters, std::vector<std::string> names,
        const OptimizerSettings& settings, Communicator& communicator);

  // Sums gradients over the ranks, clips, updates the owned parameters, shares them, and clears
  // every gradient. Parameters without a gradient are treated as having a zero one.
  StepReport step();
  // Clears gradients without stepping.
  void zero_grad();

  std::int64_t steps() const { return steps_; }
  double lr_at(std::int64_t step) const;  // the rate of 1-based step `step`

  // This rank's state: its owned parameters' moments ("exp_avg.<name>", "exp_avg_sq.<name>"),
  // and metadata with the step count, the world size and this rank.
  NamedTensors state() const;
  // Restores a state written by state() on the same rank of a world of the same size.
  Status load_state(const NamedTensors& state);

 private:
  std::vector<at::Tensor> parameters_;
  std::vector<std::string> names_;
  std::vector<int> owners_;
  std::vector<at::Tensor> exp_avg_;  // undefined for parameters other ranks own
  std::vector<at::Tensor> exp_avg_sq_;
  OptimizerSettings settings_;
  Communicator& communicator_;
  std::int64_t steps_ = 0;
};

}  // namespace cudaagent
