// Ranks from the environment and collectives over c10d's process groups. Only this file includes
// the c10d and Gloo headers (heavy, and absent from some torch installs): without Gloo's headers
// the build still has every other path, and connect_communicator says what is missing.
#include "cudaagent/train/rl_dist.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>

#if CUDAAGENT_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(USE_C10D_NCCL) && __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define CUDAAGENT_HAVE_NCCL 1
#endif
// Either backend meets its peers through the TCP store (a PyTorch wheel has NCCL but no Gloo
// headers, so the store cannot ride on Gloo's include).
#if CUDAAGENT_HAVE_GLOO || CUDAAGENT_HAVE_NCCL
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace cudaagent {
namespace {

Result<int> int_variable(const std::function<const char*(const char*)>& lookup, const char* name,
                         int fallback) {
  const char* text = lookup(name);
  if (text == nullptr) return fallback;
  int value = 0;
  const std::string_view view(text);
  auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (error != std::errc() || end != view.data() + view.size() || value < 0) {
    return Status::error(std::string(name) + "='" + std::string(view) + "' is not a number >= 0");
  }
  return value;
}

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  c10::Device device() const override { return c10::Device(c10::kCPU); }
  void all_reduce_sum(std::vector<at::Tensor>&) override {}
  void all_reduce_max(std::vector<at::Tensor>&) override {}
  void broadcast(std::vector<at::Tensor>&, int) override {}
  void barrier() override {}
};

#if CUDAAGENT_HAVE_GLOO || CUDAAGENT_HAVE_NCCL
// One process group of either backend; c10d's classes share the collective signatures.
template <class Group>
class GroupCommunicator final : public Communicator {
 public:
  GroupCommunicator(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<Group> group,
                    int rank, int world_size, c10::Device device)
      : store_(std::move(store)),
        group_(std::move(group)),
        rank_(rank),
        world_size_(world_size),
        device_(device) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  c10::Device device() const override { return device_; }
  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    reduce(tensors, c10d::ReduceOp::SUM);
  }
  void all_reduce_max(std::vector<at::Tensor>& tensors) override {
    reduce(tensors, c10d::ReduceOp::MAX);
  }
  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> one{tensor};
      group_->broadcast(one, options)->wait();
    }
  }
  void barrier() override {
    // A tiny all-reduce is a barrier on every backend and needs no device hint.
    std::vector<at::Tensor> one{at::zeros({1}, at::TensorOptions().device(device_))};
    group_->allreduce(one)->wait();
  }

 private:
  void reduce(std::vector<at::Tensor>& tensors, c10d::ReduceOp op) {
    c10d::AllreduceOptions options;
    options.reduceOp = op;
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> one{tensor};
      group_->allreduce(one, options)->wait();
    }
  }
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<Group> group_;
  int rank_;
  int world_size_;
  c10::Device
      device_;  // where the backend's tensors live: the CPU for Gloo, this rank's GPU for NCCL
};
#endif

// Flattens a bucket, lets `collective` act on the flat tensor, and copies the result back.
void run_bucket(std::vector<at::Tensor>& bucket,
                const std::function<void(at::Tensor&)>& collective) {
  if (bucket.empty()) return;
  std::vector<at::Tensor> flat_parts;
  flat_parts.reserve(bucket.size());
  for (const auto& tensor : bucket) flat_parts.push_back(tensor.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  collective(flat);
  std::int64_t offset = 0;
  for (auto& tensor : bucket) {
    const std::int64_t n = tensor.numel();
    tensor.copy_(flat.narrow(0, offset, n).view_as(tensor));
    offset += n;
  }
  bucket.clear();
}

// Groups tensors in order into buckets of one dtype and device and at most ~bucket_bytes.
void for_each_bucket(std::vector<at::Tensor>& tensors, std::int64_t bucket_bytes,
                     const std::function<void(at::Tensor&)>& collective) {
  std::vector<at::Tensor> bucket;
  std::int64_t bytes = 0;
  for (auto& tensor : tensors) {
    const auto size = static_cast<std::int64_t>(tensor.nbytes());
    if (!bucket.empty() &&
        (bytes + size > bucket_bytes || bucket.front().scalar_type() != tensor.scalar_type() ||
         bucket.front().device() != tensor.device())) {
      run_bucket(bucket, collective);
      bytes = 0;
    }
    bucket.push_back(tensor);
    bytes += size;
  }
  run_bucket(bucket, collective);
}

}  // namespace

Result<RankInfo> rank_from_environment(const std::function<const char*(const char*)>& lookup) {
  RankInfo info;
  const bool torchrun = lookup("RANK") != nullptr;
  const char* rank_name = torchrun ? "RANK" : "SLURM_PROCID";
  const char* world_name = torchrun ? "WORLD_SIZE" : "SLURM_NTASKS";
  const char* local_name = torchrun ? "LOCAL_RANK" : "SLURM_LOCALID";
  auto final_rank = int_variable(lookup, rank_name, 0);
  auto world = int_variable(lookup, world_name, 1);
  auto local = int_variable(lookup, local_name, 0);
  auto port = int_variable(lookup, "MASTER_PORT", 29500);
  for (const auto* result : {&final_rank, &world, &local, &port}) {
    if (!*result) return result->status();
  }
  info.rank = final_rank.value();
  info.world_size = world.value();
  info.local_rank = local.value();
  info.master_port = port.value();
  if (info.world_size < 1 || info.rank >= info.world_size) {
    return Status::error(std::string(rank_name) + "=" + std::to_string(info.rank) +
                         " is not below " + world_name + "=" + std::to_string(info.world_size));
  }
  if (info.master_port < 1 || info.master_port > 65535) {
    return Status::error("MASTER_PORT=" + std::to_string(info.master_port) + " is not a port");
  }
  if (const char* addr = lookup("MASTER_ADDR"); addr != nullptr && *addr != '\0')
    info.master_addr = addr;
  return info;
}

std::unique_ptr<Communicator> make_local_communicator() {
  return std::make_unique<LocalCommunicator>();
}

int cuda_device_for(int local_rank, int visible_devices) {
  if (visible_devices <= 0 || local_rank < visible_devices) return local_rank;
  return local_rank % visible_devices;
}

Result<std::unique_ptr<Communicator>> connect_communicator(const RankInfo& rank,
                                                           const std::string& backend,
                                                           std::chrono::milliseconds timeout) {
  if (!rank.distributed()) return make_local_communicator();
#if CUDAAGENT_HAVE_GLOO || CUDAAGENT_HAVE_NCCL
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(rank.master_port);
  store_options.isServer = rank.rank == 0;
  store_options.numWorkers = static_cast<std::size_t>(rank.world_size);
  store_options.waitWorkers = true;
  store_options.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(rank.master_addr, store_options);
#endif
  if (backend == "gloo") {
#if CUDAAGENT_HAVE_GLOO
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->timeout = timeout;
    if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface != nullptr) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
    } else if (rank.master_addr == "127.0.0.1" || rank.master_addr == "localhost") {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    auto group =
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank.rank, rank.world_size, options);
    return std::unique_ptr<Communicator>(new GroupCommunicator<c10d::ProcessGroupGloo>(
        store, group, rank.rank, rank.world_size, c10::Device(c10::kCPU)));
#else
    return Status::error("this build has no Gloo (install libgloo-dev and reconfigure)");
#endif
  }
  if (backend == "nccl") {
#if CUDAAGENT_HAVE_NCCL
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    auto group =
        c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank.rank, rank.world_size, options);
    return std::unique_ptr<Communicator>(new GroupCommunicator<c10d::ProcessGroupNCCL>(
        store, group, rank.rank, rank.world_size,
        c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(rank.cuda_device >= 0 ? rank.cuda_device
                                                                                    : rank.local_rank))));
#else
    return Status::error("this torch build has no NCCL process group");
#endif
  }
  return Status::error("unknown backend '" + backend + "' (gloo, nccl)");
}

void all_reduce_in_buckets(Communicator& communicator, std::vector<at::Tensor>& tensors,
                           std::int64_t bucket_bytes) {
  if (communicator.world_size() == 1) return;
  at::NoGradGuard no_grad;
  for_each_bucket(tensors, bucket_bytes, [&](at::Tensor& flat) {
    std::vector<at::Tensor> one{flat};
    communicator.all_reduce_sum(one);
  });
}

std::vector<int> plan_parameter_owners(const std::vector<std::int64_t>& numels, int world_size) {
  std::vector<std::size_t> order(numels.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return numels[a] > numels[b]; });
  std::vector<std::int64_t> load(static_cast<std::size_t>(std::max(world_size, 1)), 0);
  std::vector<int> owners(numels.size(), 0);
  for (std::size_t index : order) {
    const auto lightest =
        static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owners[index] = static_cast<int>(lightest);
    load[lightest] += numels[index];
  }
  return owners;
}

void broadcast_from_owners(Communicator& communicator, std::vector<at::Tensor>& parameters,
                           const std::vector<int>& owners, std::int64_t bucket_bytes) {
  if (communicator.world_size() == 1) return;
  at::NoGradGuard no_grad;
  for (int root = 0; root < communicator.world_size(); ++root) {
    std::vector<at::Tensor> owned;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      if (owners[i] == root) owned.push_back(parameters[i]);
    }
    for_each_bucket(owned, bucket_bytes, [&](at::Tensor& flat) {
      std::vector<at::Tensor> one{flat};
      communicator.broadcast(one, root);
    });
  }
}

}  // namespace cudaagent
