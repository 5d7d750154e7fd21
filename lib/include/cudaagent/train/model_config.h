// A decoder's shape from its Hugging Face config.json, for the Qwen2 / Llama / Mistral family we
// implement: RMSNorm, rotary embeddings (default type), grouped-query attention, SwiGLU. A config
// that asks for something else (rope scaling, sliding windows, another activation) is refused by
// name, so a checkpoint never runs with silently different arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/train/tokenizer.h"

namespace cudaagent::train {

struct ModelConfig {
  std::string model_type;  // qwen2, llama, mistral
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry biases (always for qwen2)
  bool mlp_bias = false;
  std::string torch_dtype;      // the checkpoint's declared dtype ("bfloat16", ...), may be empty
  std::vector<TokenId> eos_token_ids;  // config.json's eos_token_id (int or list)
};

// Parses config.json text. A Status names the unsupported or missing field.
Result<ModelConfig> parse_model_config(std::string_view json);
// Reads <dir>/config.json.
Result<ModelConfig> load_model_config(const std::string& dir);

// The ids that end generation for a checkpoint, deduplicated: generation_config.json's
// eos_token_id (an int or a list), config.json's, and the tokenizer_config.json eos_token's id.
std::vector<TokenId> load_eos_token_ids(const std::string& dir, const ModelConfig& config,
                                        const Tokenizer& tokenizer);

// config.json text rewritten with its dtype entries ("torch_dtype", "dtype") set to `dtype`, every
// other entry kept in order; for a checkpoint written in another dtype than it was read in.
Result<std::string> rewrite_config_dtype(std::string_view json, std::string_view dtype);

}  // namespace cudaagent::train
