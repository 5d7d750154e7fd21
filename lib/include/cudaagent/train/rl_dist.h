// Data parallelism for the RL stages: which rank this process is (from the variables srun or a
// launcher sets), and a communicator over torch.distributed's process groups (Gloo for CPU
// tensors, NCCL for CUDA tensors when the torch build has it). Gradients are all-reduced in
// buckets; ZeRO-1 owners broadcast the parameters they updated. One process, one rank: a world of
// one needs no communicator at all (every collective is a no-op).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // this rank's place on its node
  int cuda_device = -1;  // the CUDA device it uses (cuda_device_for); -1: its local rank
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool distributed() const { return world_size > 1; }
};

// RANK / WORLD_SIZE / LOCAL_RANK (torchrun's), else SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID
// (srun's); MASTER_ADDR and MASTER_PORT give the rendezvous (defaults 127.0.0.1:29500). A single
// rank when none are set. A Status for values that are not numbers or out of range. `lookup`
// returns a variable's value or nullptr (std::getenv in the tools; a map in tests).
Result<RankInfo> rank_from_environment(const std::function<const char*(const char*)>& lookup);

// The CUDA device of a rank whose process sees `visible_devices` GPUs: its local rank, unless the
// process sees no more than that (srun --gpus-per-task and other per-task bindings show each task
// its own GPUs, numbered from 0), then the local rank modulo what it sees. 0 or fewer visible:
// the local rank, for the device's own error to name.
int cuda_device_for(int local_rank, int visible_devices);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Where this backend's tensors must live: the CPU (Gloo, one process) or this rank's GPU (NCCL).
  virtual c10::Device device() const = 0;
  // Sums each tensor over the ranks, in place. All ranks pass tensors of the same shapes.
  virtual void all_reduce_sum(std::vector<at::Tensor>& tensors) = 0;
  // The elementwise maximum over the ranks, in place.
  virtual void all_reduce_max(std::vector<at::Tensor>& tensors) = 0;
  // Replaces each tensor by root's, in place.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void barrier() = 0;
};

// The world of one process: every collective leaves the tensors as they are.
std::unique_ptr<Communicator> make_local_communicator();

// Joins the process group of `rank` (rank 0 hosts the rendezvous store). `backend` is "gloo"
// (CPU tensors) or "nccl" (CUDA tensors). Blocks until every rank has joined or `timeout` passes.
// A Status when the backend is not in this build or the rendezvous fails.
Result<std::unique_ptr<Communicator>> connect_communicator(const RankInfo& rank,
                                                           const std::string& backend,
                                                           std::chrono::milliseconds timeout);

// Sums `tensors` (gradients) over the ranks in flat buckets of about `bucket_bytes`, so a model of
// hundreds of tensors costs a few collectives. Tensors in one bucket share a dtype and device.
void all_reduce_in_buckets(Communicator& communicator, std::vector<at::Tensor>& tensors,
                           std::int64_t bucket_bytes);

// ZeRO-1: which rank owns (keeps optimiser state for, and updates) each parameter. Parameters go,
// largest first, to the rank with the fewest elements so far; the same sizes give the same plan on
// every rank. Returns owner[i] for parameter i.
std::vector<int> plan_parameter_owners(const std::vector<std::int64_t>& numels, int world_size);

// After each owner updated its parameters: every rank receives them, in buckets per owner.
void broadcast_from_owners(Communicator& communicator, std::vector<at::Tensor>& parameters,
                           const std::vector<int>& owners, std::int64_t bucket_bytes);

}  // namespace cudaagent
