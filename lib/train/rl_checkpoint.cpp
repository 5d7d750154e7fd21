// Collective checkpoint writing and the single-rank readers (see rl_checkpoint.h).
#include "cudaagent/train/rl_checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/files.h"
#include "cudaagent/base/session.h"
#include "cudaagent/train/rl_tensor_io.h"

namespace cudaagent {
namespace {

namespace fs = std::filesystem;

std::string iteration_name(std::int64_t iteration) {
  char name[32];
  std::snprintf(name, sizeof name, "iter-%08lld", static_cast<long long>(iteration));
  return name;
}

std::string rank_suffix(const Communicator& communicator) {
  return ".rank-" + std::to_string(communicator.rank()) + "-of-" +
         std::to_string(communicator.world_size()) + ".safetensors";
}

std::string state_json(const RunState& state) {
  std::string text;
  JsonWriter json(text);
  json.begin_object()
      .field("stage", state.stage)
      .field("iteration", state.iteration)
      .field("epoch", state.epoch)
      .field("position", state.position)
      .field("data_fingerprint", state.data_fingerprint)
      .field("seed", std::to_string(state.seed))  // a string: JSON numbers lose 64-bit seeds
      .field("kl_coef", state.kl_coef)
      .field("metrics_bytes", static_cast<std::int64_t>(state.metrics_bytes))
      .field("world_size", state.world_size)
      .field("reference_spec", state.reference_spec)
      .field("compute_dtype", state.compute_dtype)
      .end_object();
  text.push_back('\n');
  return text;
}

void remove_old_checkpoints(const std::string& directory, int keep) {
  if (keep <= 0) return;
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("iter-", 0) == 0 && name.find('.') == std::string::npos) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < names.size(); ++i) {
    fs::remove_all(fs::path(directory) / names[i], error);
  }
}

}  // namespace

Result<std::string> write_checkpoint(const std::string& run_directory, const RunState& state,
                                     const CheckpointParts& parts, Communicator& communicator,
                                     int keep) {
  const std::string root = run_directory + "/checkpoints";
  const std::string final_directory = root + "/" + iteration_name(state.iteration);
  const std::string partial = final_directory + ".partial";
  Status status = Status::ok();
  if (communicator.rank() == 0) {
    std::error_code error;
    fs::remove_all(partial, error);
    if (!make_directories(partial, 0755))
      status = Status::error("cannot create " + cudaagent::quoted(partial));
  }
  communicator.barrier();
  if (status && communicator.rank() == 0) {
    for (const auto& [name, model] : parts.models) {
      status = model->save(partial + "/" + name);
      if (!status) break;
    }
    if (status && !write_file_atomically(partial + "/state.json", state_json(state))) {
      status = Status::error("cannot write " + cudaagent::quoted(partial + "/state.json"));
    }
  }
  for (const auto& [name, optimizer] : parts.optimizers) {
    if (!status) break;
    status = rl_write_tensors(partial + "/optim-" + name + rank_suffix(communicator),
                              optimizer->state());
  }
  if (status) {
    NamedTensors rng;
    rng.tensors.emplace_back("cpu_generator", at::detail::getDefaultCPUGenerator().get_state());
    status = rl_write_tensors(partial + "/rng" + rank_suffix(communicator), rng);
  }
  // Every rank learns whether any rank failed before the checkpoint is published.
  std::vector<at::Tensor> failed{
      at::full({1}, status ? 0.0 : 1.0, at::TensorOptions().dtype(at::kFloat))
          .to(communicator.device())};
  communicator.all_reduce_sum(failed);
  if (failed[0].item<double>() > 0 && status)
    status = Status::error("another rank failed to write its checkpoint part");
  if (status && communicator.rank() == 0) {
    std::error_code error;
    fs::remove_all(final_directory, error);
    fs::rename(partial, final_directory, error);
    if (error) {
      status =
          Status::error("cannot rename " + cudaagent::quoted(partial) + ": " + error.message());
    } else if (!write_file_atomically(root + "/latest", iteration_name(state.iteration) + "\n")) {
      status = Status::error("cannot write " + cudaagent::quoted(root + "/latest"));
    } else {
      remove_old_checkpoints(root, keep);
    }
  }
  communicator.barrier();
  if (!status) return status;
  return final_directory;
}

std::optional<std::string> latest_checkpoint(const std::string& run_directory) {
  std::string name;
  if (!read_whole_file(run_directory + "/checkpoints/latest", name)) return std::nullopt;
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name.empty() || name.find('/') != std::string::npos) return std::nullopt;
  return run_directory + "/checkpoints/" + name;
}

Result<RunState> read_run_state(const std::string& checkpoint_directory) {
  const std::string path = checkpoint_directory + "/state.json";
  std::string text;
  if (!read_whole_file(path, text)) return Status::error("cannot read " + cudaagent::quoted(path));
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(text).get(object))
    return Status::error(cudaagent::quoted(path) + " is not a JSON object");
  RunState state;
  std::string_view stage, fingerprint, seed, reference;
  std::int64_t metrics_bytes = 0;
  std::int64_t world_size = 1;
  if (object["stage"].get_string().get(stage) ||
      object["iteration"].get_int64().get(state.iteration) ||
      object["epoch"].get_int64().get(state.epoch) ||
      object["position"].get_int64().get(state.position) ||
      object["data_fingerprint"].get_string().get(fingerprint) ||
      object["seed"].get_string().get(seed) || object["kl_coef"].get_double().get(state.kl_coef) ||
      object["metrics_bytes"].get_int64().get(metrics_bytes) ||
      object["world_size"].get_int64().get(world_size) ||
      object["reference_spec"].get_string().get(reference)) {
    return Status::error(cudaagent::quoted(path) + " lacks a field or has one of the wrong type");
  }
  state.stage = std::string(stage);
  state.data_fingerprint = std::string(fingerprint);
  state.reference_spec = std::string(reference);
  std::string_view compute_dtype;
  if (!object["compute_dtype"].get_string().get(compute_dtype)) {
    state.compute_dtype = std::string(compute_dtype);
  }
  state.metrics_bytes = static_cast<std::uint64_t>(metrics_bytes);
  state.world_size = static_cast<int>(world_size);
  try {
    state.seed = std::stoull(std::string(seed));
  } catch (const std::exception&) {
    return Status::error(cudaagent::quoted(path) + ": bad seed");
  }
  return state;
}

Status restore_optimizer(const std::string& checkpoint_directory, const std::string& name,
                         AdamW& optimizer, const Communicator& communicator) {
  auto state = rl_read_tensors(checkpoint_directory + "/optim-" + name + rank_suffix(communicator));
  if (!state) return state.status();
  return optimizer.load_state(state.value()).with_context("optimiser '" + name + "'");
}

Status restore_generator(const std::string& checkpoint_directory,
                         const Communicator& communicator) {
  auto state = rl_read_tensors(checkpoint_directory + "/rng" + rank_suffix(communicator));
  if (!state) return state.status();
  at::Tensor generator_state = state.value().find("cpu_generator");
  if (!generator_state.defined()) return Status::error("checkpoint lacks the generator state");
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(generator_state);
  return Status::ok();
}

}  // namespace cudaagent
