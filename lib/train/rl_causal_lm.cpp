// The RL stages' models over train::CausalLm (Qwen2 / Llama from a Hugging Face checkpoint): the
// actor and reference as a PolicyModel, the critic as the same trunk with a scalar value head.
// Checkpoints are CausalLm::save's (safetensors with the checkpoint's tensor names, config.json and
// the tokenizer files), so `cudaagent-train serve` and any inference server load what PPO wrote;
// a critic adds value_head.safetensors beside them.
#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>

#include "cudaagent/base/session.h"
#include "cudaagent/train/causal_lm.h"
#include "cudaagent/train/rl_models.h"
#include "cudaagent/train/safetensors.h"

namespace cudaagent {
namespace {

constexpr const char* kValueHeadFile = "value_head.safetensors";
constexpr const char* kValueHeadWeight = "value_head.weight";
constexpr const char* kValueHeadBias = "value_head.bias";

// Recomputing each layer in the backward pass keeps only layer inputs alive: the memory of a
// long multi-turn batch is then dominated by one layer's activations, not all of them.
constexpr bool kRecomputeLayers = true;

Result<std::unique_ptr<train::CausalLm>> load_trunk(const std::string& directory,
                                                    c10::Device device, c10::ScalarType compute) {
  train::ModelOptions options;
  options.device = device.str();
  // The optimiser updates the weights in place in their own dtype, so they stay float32: AdamW's
  // small steps vanish in bfloat16 weights without a float32 master copy. A 16-bit compute dtype
  // runs the products on casts of them (mixed precision, as autocast does).
  options.dtype = "float32";
  options.compute_dtype = compute_dtype_name(compute);
  options.trainable = true;
  auto model = train::CausalLm::load(directory, options);
  if (!model) return model.status().with_context(cudaagent::quoted(directory));
  return std::move(model.value());
}

train::ForwardOptions forward_options(const TokenBatch& batch, c10::Device device) {
  train::ForwardOptions options;
  options.position_ids = batch.position_ids.to(device);
  options.attention_mask = batch.attention_mask.to(device);
  options.recompute = kRecomputeLayers;
  return options;
}

std::vector<std::string> names_of(const train::CausalLm& model) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : model.named_parameters()) names.push_back(name);
  return names;
}

class CausalLmPolicy final : public PolicyModel {
 public:
  explicit CausalLmPolicy(std::unique_ptr<train::CausalLm> model) : model_(std::move(model)) {}
  std::vector<at::Tensor> parameters() override { return model_->parameters(); }
  std::vector<std::string> parameter_names() const override { return names_of(*model_); }
  c10::Device device() const override { return model_->device(); }
  std::int64_t vocab_size() const override { return model_->config().vocab_size; }
  Status save(const std::string& directory) const override { return model_->save(directory); }

  // CausalLm scores column t of its [B, L-1] output as the token in column t + 1, so response
  // token j (column P + j) is output column P - 1 + j. Only those columns on real tokens are
  // computed; the rest are zero.
  ResponseScores score_response(const TokenBatch& batch, bool with_entropy) override {
    const c10::Device device = model_->device();
    const std::int64_t first = batch.response_start - 1;
    const std::int64_t length = batch.response_length();
    train::ScoreOptions options;
    options.forward = forward_options(batch, device);
    at::Tensor real = batch.attention_mask.to(device).narrow(1, 1, batch.input_ids.size(1) - 1) != 0;
    at::Tensor in_response = at::zeros_like(real);
    in_response.narrow(1, first, length).fill_(true);
    options.mask = real.logical_and(in_response);
    options.entropy = with_entropy;
    const train::TokenScores scores = model_->score_next_tokens(batch.input_ids.to(device), options);
    ResponseScores out;
    out.log_probs = scores.logprobs.narrow(1, first, length);
    if (with_entropy) out.entropy = scores.entropy.narrow(1, first, length);
    return out;
  }

 private:
  std::unique_ptr<train::CausalLm> model_;
};

class CausalLmValue final : public ValueModel {
 public:
  CausalLmValue(std::unique_ptr<train::CausalLm> trunk, at::Tensor weight, at::Tensor bias)
      : trunk_(std::move(trunk)), weight_(std::move(weight)), bias_(std::move(bias)) {
    weight_.requires_grad_(true);
    bias_.requires_grad_(true);
  }
  std::vector<at::Tensor> parameters() override {
    std::vector<at::Tensor> out = trunk_->parameters();
    out.push_back(weight_);
    out.push_back(bias_);
    return out;
  }
  std::vector<std::string> parameter_names() const override {
    std::vector<std::string> names = names_of(*trunk_);
    names.emplace_back(kValueHeadWeight);
    names.emplace_back(kValueHeadBias);
    return names;
  }
  c10::Device device() const override { return trunk_->device(); }
  std::int64_t vocab_size() const override { return trunk_->config().vocab_size; }

  Status save(const std::string& directory) const override {
    if (auto status = trunk_->save(directory); !status) return status;
    std::vector<train::TensorToWrite> tensors;
    for (const auto& [name, tensor] : {std::pair{kValueHeadWeight, weight_}, std::pair{kValueHeadBias, bias_}}) {
      train::TensorToWrite t;
      t.name = name;
      t.dtype = train::DType::kF32;
      t.shape = tensor.sizes().vec();
      t.fill = [source = tensor](std::byte* destination) {
        const at::Tensor host = source.detach().to(at::kCPU, at::kFloat).contiguous();
        std::memcpy(destination, host.data_ptr(), host.nbytes());
      };
      tensors.push_back(std::move(t));
    }
    return train::write_safetensors(directory + "/" + kValueHeadFile, tensors, {});
  }

  // The value of the state before response token j is read at column P + j - 1, as veRL's critic
  // does: the hidden state that also predicts that token.
  at::Tensor values(const TokenBatch& batch) override {
    const c10::Device device = trunk_->device();
    at::Tensor hidden = trunk_->hidden_states(batch.input_ids.to(device), forward_options(batch, device));
    hidden = hidden.narrow(1, batch.response_start - 1, batch.response_length()).to(at::kFloat);
    return at::linear(hidden, weight_, bias_).squeeze(-1);
  }

 private:
  std::unique_ptr<train::CausalLm> trunk_;
  at::Tensor weight_, bias_;
};

Result<at::Tensor> read_head_tensor(const train::Checkpoint& checkpoint, const char* name,
                                    std::vector<std::int64_t> shape, c10::Device device) {
  const auto view = checkpoint.find(name);
  if (!view || view->info->dtype != train::DType::kF32 || view->info->shape != shape) {
    return Status::error(std::string(kValueHeadFile) + " lacks a float32 '" + name +
                         "' of the trunk's hidden size");
  }
  at::Tensor host = at::empty(shape, at::kFloat);
  std::memcpy(host.data_ptr(), view->bytes.data(), view->bytes.size());
  return host.to(device);
}

}  // namespace

Result<std::unique_ptr<PolicyModel>> load_causal_lm_policy(const std::string& directory,
                                                           c10::Device device,
                                                           c10::ScalarType compute) {
  auto model = load_trunk(directory, device, compute);
  if (!model) return model.status();
  return std::unique_ptr<PolicyModel>(new CausalLmPolicy(std::move(model.value())));
}

Result<std::unique_ptr<ValueModel>> load_causal_lm_value(const std::string& directory,
                                                         c10::Device device,
                                                         c10::ScalarType compute) {
  auto trunk = load_trunk(directory, device, compute);
  if (!trunk) return trunk.status();
  const std::int64_t hidden = trunk.value()->config().hidden_size;
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  // A new head starts at zero, so the critic's first values are 0 for every state: the first
  // advantages are the returns themselves rather than the noise of a random projection of the
  // trunk's hidden states (whose norms are large in a pretrained LM).
  at::Tensor weight = at::zeros({1, hidden}, options);
  at::Tensor bias = at::zeros({1}, options);
  const std::string head_path = directory + "/" + kValueHeadFile;
  std::error_code error;
  if (std::filesystem::exists(head_path, error)) {
    auto checkpoint = train::Checkpoint::open(head_path);
    if (!checkpoint) return checkpoint.status();
    auto w = read_head_tensor(checkpoint.value(), kValueHeadWeight, {1, hidden}, device);
    if (!w) return w.status().with_context(cudaagent::quoted(directory));
    auto b = read_head_tensor(checkpoint.value(), kValueHeadBias, {1}, device);
    if (!b) return b.status().with_context(cudaagent::quoted(directory));
    weight = w.value();
    bias = b.value();
  }
  return std::unique_ptr<ValueModel>(
      new CausalLmValue(std::move(trunk.value()), std::move(weight), std::move(bias)));
}

}  // namespace cudaagent
