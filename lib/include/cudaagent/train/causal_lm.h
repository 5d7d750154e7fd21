// A Qwen2 / Llama-family decoder on libtorch (ATen), loaded from a Hugging Face checkpoint and
// computing the numbers a policy-gradient step needs: per-token log-probabilities and entropies
// of chosen tokens, differentiable, in chunks so that full [tokens x vocabulary] logits never exist
// at once (forward or backward). The arithmetic follows transformers' modelling code operation for
// operation (fp32 RMSNorm statistics, fp32 rotary tables cast to the compute dtype, logits cast to
// fp32), which is what the parity gates against Hugging Face measure. The same code runs on
// Debian's libtorch 1.13 (CPU) and on PyTorch 2.x wheels (CUDA, where attention uses
// scaled_dot_product_attention).
//
// Padding: a right-padded batch needs nothing more (with causal attention a real token never sees
// a pad to its right). Any other layout (veRL's left-padded prompts, say) passes position ids and
// an attention mask (ForwardOptions): pad keys are then masked out and rotary positions taken
// from the ids. Values computed at pad positions are meaningless; callers mask them out.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/train/model_config.h"

namespace cudaagent::train {

struct ModelOptions {
  std::string device = "cpu";     // "cpu", "cuda", "cuda:1", ...
  std::string dtype = "float32";  // parameters and compute: float32, bfloat16, float16, or auto
                                  // (the checkpoint's declared dtype)
  bool trainable = false;         // parameters require gradients
  // Mixed precision: the dtype matrix products and attention run in while the parameters (the
  // master weights an optimiser updates) stay in `dtype`, the way autocast runs a float32 model.
  // Empty or equal to `dtype`: everything in `dtype`. Only float32 parameters with a 16-bit
  // compute dtype are a useful combination; see hidden_states for what runs in which dtype.
  std::string compute_dtype;
};

struct ForwardOptions {
  at::Tensor position_ids;    // [B, T] int64 rotary positions; undefined: 0..T-1 on every row
  at::Tensor attention_mask;  // [B, T], nonzero on real tokens; undefined: all real (causal only)
  bool recompute = false;     // per-layer activation recomputation (keeps only layer inputs)
};

struct ScoreOptions {
  ForwardOptions forward;
  // [B, T-1] bool, where to compute (the response tokens, say); undefined: every position.
  at::Tensor mask;
  double temperature = 1.0;  // log-probabilities of softmax(logits / temperature)
  bool entropy = true;       // also the entropy of each position's distribution
  std::int64_t chunk_tokens = 1024;  // positions whose logits exist at once
};

struct TokenScores {
  at::Tensor logprobs;  // float32; zero where not computed
  at::Tensor entropy;   // float32; undefined unless asked for
};

// The key/value cache for batched decoding: per layer [slots, kv_heads, capacity, head_dim] in
// the model's dtype and device. Slot s holds one sequence; position p of it is written when token
// p of that sequence goes through the model.
struct KvCache {
  std::vector<at::Tensor> keys, values;
  std::int64_t slots = 0, capacity = 0;
};

class CausalLm {
 public:
  // Reads config.json and the safetensors weights of `dir` onto the device. A Status for an
  // unsupported config, a missing or misshapen tensor, or a device that does not exist.
  static Result<std::unique_ptr<CausalLm>> load(const std::string& dir, const ModelOptions& options);
  ~CausalLm();
  CausalLm(const CausalLm&) = delete;
  CausalLm& operator=(const CausalLm&) = delete;

  const ModelConfig& config() const { return config_; }
  const std::string& source_dir() const { return source_dir_; }
  at::Device device() const;
  at::ScalarType dtype() const;          // the parameters'
  at::ScalarType compute_dtype() const;  // matrix products' and attention's (ModelOptions)

  // Final-norm hidden states [B, T, hidden] of token ids [B, T] (int64; moved to the device): the
  // trunk a value head goes on. Differentiable when the parameters require grad. With
  // `recompute` only each layer's input is kept for the backward pass, which runs the layer
  // again (the model must outlive that backward pass). With a compute dtype below the
  // parameters' (mixed precision) the residual stream, the norms and the result stay in the
  // parameters' dtype; projections, attention and the MLP run in the compute dtype on copies of
  // the weights cast as each layer runs, through which gradients reach the parameters.
  at::Tensor hidden_states(const at::Tensor& input_ids, const ForwardOptions& options = {}) const;

  // Next-token scores: logprobs[b, t] = log p(input_ids[b, t+1] | input_ids[b, ..t]), [B, T-1],
  // and the entropy of the same distribution. Differentiable in the parameters.
  TokenScores score_next_tokens(const at::Tensor& input_ids, const ScoreOptions& options = {}) const;

  // The chunked core of score_next_tokens: log-probabilities of `targets` [N] (int64) under
  // lm_head(hidden) / temperature for hidden [N, hidden], plus entropies. Differentiable in
  // `hidden` and the output embedding, recomputing each chunk's logits in the backward pass.
  TokenScores score_hidden(const at::Tensor& hidden, const at::Tensor& targets, double temperature,
                           bool entropy, std::int64_t chunk_tokens) const;

  // Float32 logits [N, vocab] of hidden states [N, hidden] (decoding: N is the batch).
  at::Tensor logits(const at::Tensor& hidden) const;

  // Trainable tensors, named as in the checkpoint (the tied output embedding appears once, as
  // model.embed_tokens.weight).
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const;
  std::vector<at::Tensor> parameters() const;

  // Writes a checkpoint an inference server loads: safetensors with the checkpoint's tensor
  // names (sharded with an index above `max_shard_bytes`), config.json with its dtype updated,
  // and the tokenizer, chat template and generation files copied from source_dir(). `dir` must
  // not exist; it appears complete or not at all (written beside it, then renamed).
  // `dtype` empty: the model's dtype.
  Status save(const std::string& dir, const std::string& dtype = "",
              std::uint64_t max_shard_bytes = 5'000'000'000) const;

  // Decoding with a cache (inference only: call under at::InferenceMode or NoGradGuard).
  KvCache make_cache(std::int64_t slots, std::int64_t capacity) const;
  // Runs `ids` [T] as positions 0..T-1 of cache slot `slot` and returns the last position's
  // hidden state [hidden].
  at::Tensor prefill(const at::Tensor& ids, KvCache& cache, std::int64_t slot) const;
  // One step for slots 0..n-1: token ids [n] at positions [n] (int64, each below the cache
  // capacity; on the host, or the call waits for the device to read their maximum). Slot i
  // attends to its positions 0..positions[i]. Returns hidden states [n, hidden].
  at::Tensor decode(const at::Tensor& ids, const at::Tensor& positions, KvCache& cache) const;

  struct Layer;
  struct Weights;

 private:
  CausalLm();
  ModelConfig config_;
  std::string source_dir_;
  std::unique_ptr<Weights> weights_;
  friend class CausalLmLoader;
};

// "float32" / "bfloat16" / "float16" (and "fp32", "bf16", "fp16") as a dtype; a Status otherwise.
Result<at::ScalarType> parse_compute_dtype(const std::string& name);

}  // namespace cudaagent::train
