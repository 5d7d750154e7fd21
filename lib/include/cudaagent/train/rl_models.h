// Where the RL stages get their models: a model specification (a checkpoint directory, or
// "toy:k=v,..." for the small built-in model the tests train on the CPU) becomes a PolicyModel or a
// ValueModel. The toy model is an embedding, a causal mean of the embeddings and a two-layer
// MLP; it exists so the whole RL machinery is tested without a large model. A directory's
// config.json "model_type" picks the implementation: "cudaagent-toy" is the toy, anything else
// goes to train::CausalLm (qwen2, llama).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cudaagent/base/status.h"
#include "cudaagent/train/policy.h"

namespace cudaagent {

struct NamedTensors;

struct ToyModelConfig {
  std::int64_t vocab = 16;
  std::int64_t dim = 32;
  std::int64_t hidden = 64;
  std::int64_t positions = 64;  // position embeddings; later positions share the last one
  std::uint64_t seed = 1;       // initialisation
};

// "toy:vocab=16,dim=32,hidden=64,positions=64,seed=1"; omitted keys keep their defaults.
Result<ToyModelConfig> parse_toy_spec(const std::string& spec);

// The toy causal LM, public so tests can sample from it.
class ToyPolicyModel : public PolicyModel {
 public:
  ToyPolicyModel(const ToyModelConfig& config, c10::Device device);
  ~ToyPolicyModel() override;
  std::vector<at::Tensor> parameters() override;
  std::vector<std::string> parameter_names() const override;
  c10::Device device() const override;
  Status save(const std::string& directory) const override;
  std::int64_t vocab_size() const override;
  ResponseScores score_response(const TokenBatch& batch, bool with_entropy) override;

  // (B, L, V) next-token logits at every column (the sampler's view).
  at::Tensor logits(const TokenBatch& batch);
  const ToyModelConfig& config() const;
  // Replaces every weight by the tensor of the same name (as save() names them); a Status when
  // one is missing or has another shape.
  Status assign(const NamedTensors& tensors);

  struct Weights;

 private:
  std::unique_ptr<Weights> weights_;
};

// Every loader takes a compute dtype: the parameters stay float32 (the optimiser's master
// weights) and a causal LM runs its forward and backward products in `compute` (mixed
// precision, train::ModelOptions::compute_dtype); losses and the value head stay float32. The
// toy model computes in float32 only and refuses anything else.

// Loads an actor (or reference) model: a directory written by PolicyModel::save, a Hugging Face
// Qwen2/Llama checkpoint directory, or a toy spec.
Result<std::unique_ptr<PolicyModel>> load_policy_model(const std::string& spec, c10::Device device,
                                                       c10::ScalarType compute = c10::kFloat);

// Loads a critic: a directory written by ValueModel::save, or, from a causal LM's directory or
// spec, that model's trunk with a new value head initialised to zero (so the first values are 0).
Result<std::unique_ptr<ValueModel>> load_value_model(const std::string& spec, c10::Device device,
                                                     c10::ScalarType compute = c10::kFloat);

// True for a toy spec or a directory holding a toy model (or no readable config.json).
bool is_toy_model(const std::string& spec);

// The models over train::CausalLm (lib/train/rl_causal_lm.cpp), for a directory whose config.json
// names a Hugging Face model type. The value model is the trunk plus a linear head on the final
// hidden states, read from value_head.safetensors when the directory has one (a critic this code
// saved), else new and zero.
Result<std::unique_ptr<PolicyModel>> load_causal_lm_policy(const std::string& directory,
                                                           c10::Device device,
                                                           c10::ScalarType compute = c10::kFloat);
Result<std::unique_ptr<ValueModel>> load_causal_lm_value(const std::string& directory,
                                                         c10::Device device,
                                                         c10::ScalarType compute = c10::kFloat);

// "float32", "bfloat16", "float16": the names train::parse_compute_dtype reads.
const char* compute_dtype_name(c10::ScalarType dtype);

// "cpu", "cuda", "cuda:1".
Result<c10::Device> parse_device(const std::string& name);

}  // namespace cudaagent
