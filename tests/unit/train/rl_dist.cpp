// Ranks from the environment, and data parallelism over Gloo: two ranks (threads of this process,
// each with its own models) train PPO to the same parameters as one process does, with the
// optimiser state sharded between them.
#include "cudaagent/train/rl_dist.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "cudaagent/train/rl_ppo.h"
#include "rl_toy_env.h"

using namespace cudaagent;

namespace {

Result<RankInfo> from(std::map<std::string, std::string> variables) {
  return rank_from_environment([variables](const char* name) -> const char* {
    auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

// A port nobody listens on right now (the kernel's choice for an ephemeral bind).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

PpoSettings settings() {
  PpoSettings s;
  s.batching.mini_batch_size = 8;
  s.batching.micro_batch_size = 3;
  s.actor_optimizer.lr = 1e-2;
  s.critic_optimizer.lr = 1e-2;
  s.actor_optimizer.bucket_bytes = 4096;  // several buckets even for the toy model
  s.critic_optimizer.bucket_bytes = 4096;
  return s;
}

struct Outcome {
  std::vector<at::Tensor> actor;
  std::vector<at::Tensor> critic;
  double pg_loss = 0;
  std::size_t owned_state = 0;
};

// Two PPO iterations of 16 trajectories on a fresh toy actor and critic.
Outcome train(Communicator& communicator, const std::vector<Trajectory>& data) {
  ToyModelConfig config;
  config.vocab = 8;
  config.seed = 3;
  ToyPolicyModel actor(config, c10::Device(c10::kCPU));
  auto critic = load_value_model("toy:vocab=8,seed=3", c10::Device(c10::kCPU));
  REQUIRE(critic);
  PpoTrainer trainer(actor, *critic.value(), nullptr, settings(), communicator);
  Outcome outcome;
  for (int iteration = 0; iteration < 2; ++iteration) {
    std::vector<const Trajectory*> batch;
    for (int i = 0; i < 16; ++i)
      batch.push_back(&data[static_cast<std::size_t>(iteration * 16 + i)]);
    outcome.pg_loss = metric_value(trainer.iteration(batch, iteration), "actor/pg_loss");
  }
  for (const auto& p : actor.parameters()) outcome.actor.push_back(p.detach().clone());
  for (const auto& p : critic.value()->parameters()) outcome.critic.push_back(p.detach().clone());
  outcome.owned_state = trainer.actor_optimizer().state().tensors.size();
  return outcome;
}

}  // namespace

TEST_CASE("a rank's GPU is its local rank, or that modulo the GPUs its process sees") {
  CHECK(cuda_device_for(0, 2) == 0);
  CHECK(cuda_device_for(1, 2) == 1);
  CHECK(cuda_device_for(1, 1) == 0);  // srun --gpus-per-task: each task sees its own GPU as 0
  CHECK(cuda_device_for(3, 2) == 1);
  CHECK(cuda_device_for(2, 8) == 2);
  CHECK(cuda_device_for(1, 0) == 1);  // no GPU seen: left for the device's own error
}

TEST_CASE("ranks from torchrun's and Slurm's variables") {
  auto single = from({});
  REQUIRE(single);
  CHECK_FALSE(single.value().distributed());
  auto torchrun = from({{"RANK", "1"},
                        {"WORLD_SIZE", "4"},
                        {"LOCAL_RANK", "1"},
                        {"MASTER_ADDR", "node7"},
                        {"MASTER_PORT", "1234"},
                        {"SLURM_PROCID", "3"}});
  REQUIRE(torchrun);
  CHECK(torchrun.value().rank == 1);  // RANK wins over SLURM_PROCID
  CHECK(torchrun.value().world_size == 4);
  CHECK(torchrun.value().master_addr == "node7");
  CHECK(torchrun.value().master_port == 1234);
  auto slurm = from({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}});
  REQUIRE(slurm);
  CHECK(slurm.value().rank == 5);
  CHECK(slurm.value().local_rank == 1);
  CHECK(slurm.value().master_port == 29500);
  CHECK_FALSE(from({{"RANK", "2"}, {"WORLD_SIZE", "2"}}));
  CHECK_FALSE(from({{"RANK", "x"}, {"WORLD_SIZE", "2"}}));
  CHECK_FALSE(from({{"MASTER_PORT", "70000"}}));
}

TEST_CASE("two Gloo ranks train PPO to the parameters of one process") {
  ToyModelConfig config;
  config.vocab = 8;
  config.seed = 3;
  ToyPolicyModel sampler(config, c10::Device(c10::kCPU));
  at::Generator generator = at::detail::createCPUGenerator(5);
  testing::ToyEpisodes spec;
  spec.rows = 32;
  spec.turns = 2;
  spec.model_tokens = 3;
  const auto data = testing::sample_episodes(sampler, spec, generator);

  auto local = make_local_communicator();
  const Outcome alone = train(*local, data);

  const int port = free_port();
  Outcome ranks[2];
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      RankInfo info;
      info.rank = r;
      info.world_size = 2;
      info.master_port = port;
      auto communicator = connect_communicator(info, "gloo", std::chrono::seconds(60));
      if (!communicator) {
        errors[r] = communicator.status().message();
        return;
      }
      ranks[r] = train(*communicator.value(), data);
    });
  }
  for (auto& thread : threads) thread.join();
  REQUIRE(errors[0].empty());
  REQUIRE(errors[1].empty());
  for (int r = 0; r < 2; ++r) {
    REQUIRE(ranks[r].actor.size() == alone.actor.size());
    for (std::size_t i = 0; i < alone.actor.size(); ++i) {
      CHECK(at::allclose(ranks[r].actor[i], alone.actor[i], 1e-4, 1e-6));
      CHECK(at::equal(ranks[r].actor[i], ranks[0].actor[i]));  // ranks agree exactly
    }
    for (std::size_t i = 0; i < alone.critic.size(); ++i) {
      CHECK(at::allclose(ranks[r].critic[i], alone.critic[i], 1e-4, 1e-6));
    }
    CHECK(ranks[r].pg_loss == doctest::Approx(alone.pg_loss).epsilon(1e-4));
  }
  // ZeRO-1: the two ranks hold disjoint parts of the optimiser state, which together are whole.
  CHECK(ranks[0].owned_state > 0);
  CHECK(ranks[1].owned_state > 0);
  CHECK(ranks[0].owned_state + ranks[1].owned_state == alone.owned_state);
  // The updates moved the parameters (the comparison above is not of untouched weights).
  ToyPolicyModel fresh(config, c10::Device(c10::kCPU));
  CHECK_FALSE(at::allclose(fresh.parameters()[2], alone.actor[2], 1e-4, 1e-6));
}
