// JSONL throughput benchmark: `generate` writes trajectory-sized records (tens of KB: token ids,
// a loss mask, log-probabilities and chat text, like rollout output); `passthrough` runs them
// through the shared record driver (read, validate, add a key, write) exactly as every stage does.
// bench/run_jsonl_bench.sh drives both and times jq on the same file as the anchor.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/records/cli.h"
#include "cudaagent/records/record_stage.h"

namespace {

using cudaagent::JsonWriter;

// One record of roughly 20–60 KB with a deterministic shape for a given index.
std::string trajectory(std::mt19937_64& rng, std::uint64_t index) {
  std::uniform_int_distribution<int> token(0, 151'935);
  std::uniform_int_distribution<int> length(1500, 5000);
  std::normal_distribution<double> logprob(-0.6, 0.5);
  std::string out;
  JsonWriter json(out);
  json.begin_object();
  json.field("id", std::string("traj-") + std::to_string(index));
  json.field("task_id", std::string("task-") + std::to_string(index % 6000));
  const int prompt = length(rng) / 3, response = length(rng);
  json.key("prompt_ids").begin_array();
  for (int i = 0; i < prompt; ++i) json.value(token(rng));
  json.end_array();
  json.key("response_ids").begin_array();
  for (int i = 0; i < response; ++i) json.value(token(rng));
  json.end_array();
  json.key("loss_mask").begin_array();
  for (int i = 0; i < response; ++i) json.value((i / 200) % 3 == 2 ? 0 : 1);
  json.end_array();
  json.key("logprobs").begin_array();
  for (int i = 0; i < response; ++i) json.value(std::min(0.0, logprob(rng)));
  json.end_array();
  json.key("messages").begin_array();
  for (int turn = 0; turn < 6; ++turn) {
    json.begin_object().field("role", turn % 2 == 0 ? "assistant" : "tool");
    std::string text = "__global__ void kernel_" + std::to_string(turn) +
                       "(const float* __restrict__ x, float* y, int n) {\n"
                       "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                       "  if (i < n) y[i] = fmaxf(x[i], 0.f);  // \"relu\"\n}\n";
    json.field("content", text + text + "\tverify: PASS\n");
    json.end_object();
  }
  json.end_array();
  json.key("verify").begin_object().field("verdict", "PASS").end_object();
  json.field("finish_reason", "stop");
  json.end_object();
  out.push_back('\n');
  return out;
}

int generate(const char* path, double gigabytes) {
  std::FILE* file = std::fopen(path, "wb");
  if (file == nullptr) {
    std::perror(path);
    return 1;
  }
  std::mt19937_64 rng(20261129);
  const auto target = static_cast<std::uint64_t>(gigabytes * 1e9);
  std::uint64_t written = 0, records = 0;
  while (written < target) {
    const std::string record = trajectory(rng, records++);
    if (std::fwrite(record.data(), 1, record.size(), file) != record.size()) {
      std::perror(path);
      return 1;
    }
    written += record.size();
  }
  std::fclose(file);
  std::printf("%llu records, %llu bytes\n", static_cast<unsigned long long>(records),
              static_cast<unsigned long long>(written));
  return 0;
}

// Adds a small key to every record: the pass-through path of every stage.
class TagStage final : public cudaagent::RecordStage {
 public:
  std::string_view key() const override { return "bench"; }
  cudaagent::RecordEdit process(const cudaagent::InputRecord&) override {
    return cudaagent::RecordEdit::set_key(R"({"seen":true})");
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "generate") == 0) {
    return generate(argv[2], argc >= 4 ? std::atof(argv[3]) : 1.0);
  }
  if (argc >= 2 && std::strcmp(argv[1], "passthrough") == 0) {
    cudaagent::CommonOptions options;
    CLI::App app{"Pass records through the shared driver, adding a key", "jsonl_bench passthrough"};
    cudaagent::add_common_flags(app, options);
    TagStage stage;
    return cudaagent::run_tool("jsonl_bench", app, options, argc - 1, argv + 1,
                               [&](cudaagent::Session& session) {
                                 return cudaagent::run_record_stage(stage, options, session);
                               });
  }
  std::fprintf(stderr, "usage: jsonl_bench generate FILE [GB] | passthrough [options] [FILE...]\n");
  return 2;
}
