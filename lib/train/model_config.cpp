// config.json reading for the supported decoder family. Both spellings transformers has used are
// read: rope_theta at the top level (v4) or inside rope_parameters (v5), torch_dtype or dtype.
#include "cudaagent/train/model_config.h"

#include <simdjson.h>

#include <algorithm>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/files.h"
#include "cudaagent/base/session.h"

namespace cudaagent::train {
namespace {

using simdjson::dom::element;

bool present(element parent, std::string_view key, element& value) {
  return parent[key].get(value) == simdjson::SUCCESS && !value.is_null();
}

Status read_int(element root, std::string_view key, std::int64_t& out, bool required) {
  element value;
  if (!present(root, key, value)) {
    return required ? Status::error("config.json has no '" + std::string(key) + "'") : Status::ok();
  }
  if (value.get(out) != simdjson::SUCCESS || out <= 0) {
    return Status::error("config.json '" + std::string(key) + "' is not a positive integer");
  }
  return Status::ok();
}

void read_ids(element value, std::vector<TokenId>& out) {
  std::int64_t id = 0;
  simdjson::dom::array list;
  if (value.get(id) == simdjson::SUCCESS) {
    out.push_back(static_cast<TokenId>(id));
  } else if (value.get(list) == simdjson::SUCCESS) {
    for (element item : list) {
      if (item.get(id) == simdjson::SUCCESS) out.push_back(static_cast<TokenId>(id));
    }
  }
}

// Rope parameters: only the default (unscaled) rotary embedding is implemented.
Status read_rope(element root, ModelConfig& config) {
  element params, value;
  std::string_view type;
  if (present(root, "rope_parameters", params)) {
    if (params["rope_type"].get(type) == simdjson::SUCCESS && type != "default") {
      return Status::error("rope type '" + std::string(type) + "' is not supported (default only)");
    }
    if (present(params, "rope_theta", value) && value.get(config.rope_theta) != simdjson::SUCCESS) {
      return Status::error("rope_parameters.rope_theta is not a number");
    }
  }
  if (present(root, "rope_scaling", params)) {
    if ((params["rope_type"].get(type) == simdjson::SUCCESS || params["type"].get(type) == simdjson::SUCCESS) &&
        type != "default") {
      return Status::error("rope_scaling '" + std::string(type) + "' is not supported");
    }
  }
  if (present(root, "rope_theta", value) && value.get(config.rope_theta) != simdjson::SUCCESS) {
    return Status::error("rope_theta is not a number");
  }
  return Status::ok();
}

}  // namespace

Result<ModelConfig> parse_model_config(std::string_view json) {
  simdjson::dom::parser parser;
  element root;
  if (auto error = parser.parse(json.data(), json.size()).get(root); error || !root.is_object()) {
    return Status::error("config.json is not a JSON object");
  }
  ModelConfig config;
  std::string_view text;
  if (root["model_type"].get(text) != simdjson::SUCCESS) return Status::error("config.json has no model_type");
  config.model_type = text;
  if (config.model_type != "qwen2" && config.model_type != "llama" && config.model_type != "mistral") {
    return Status::error("model_type '" + config.model_type + "' is not supported (qwen2, llama, mistral)");
  }
  for (const auto& [key, target] : {std::pair<std::string_view, std::int64_t*>{"vocab_size", &config.vocab_size},
                                    {"hidden_size", &config.hidden_size},
                                    {"intermediate_size", &config.intermediate_size},
                                    {"num_hidden_layers", &config.num_hidden_layers},
                                    {"num_attention_heads", &config.num_attention_heads}}) {
    if (Status s = read_int(root, key, *target, true); !s) return s;
  }
  config.num_key_value_heads = config.num_attention_heads;
  if (Status s = read_int(root, "num_key_value_heads", config.num_key_value_heads, false); !s) return s;
  config.head_dim = config.hidden_size / config.num_attention_heads;
  if (Status s = read_int(root, "head_dim", config.head_dim, false); !s) return s;
  config.max_position_embeddings = 4096;
  if (Status s = read_int(root, "max_position_embeddings", config.max_position_embeddings, false); !s) return s;
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    return Status::error("num_attention_heads is not a multiple of num_key_value_heads");
  }
  element value;
  if (present(root, "rms_norm_eps", value) && value.get(config.rms_norm_eps) != simdjson::SUCCESS) {
    return Status::error("rms_norm_eps is not a number");
  }
  if (Status s = read_rope(root, config); !s) return s;
  if (present(root, "tie_word_embeddings", value) && value.get(config.tie_word_embeddings) != simdjson::SUCCESS) {
    return Status::error("tie_word_embeddings is not a boolean");
  }
  if (root["hidden_act"].get(text) == simdjson::SUCCESS && text != "silu") {
    return Status::error("hidden_act '" + std::string(text) + "' is not supported (silu)");
  }
  bool flag = false;
  if (root["use_sliding_window"].get(flag) == simdjson::SUCCESS && flag) {
    return Status::error("sliding-window attention is not supported");
  }
  if (config.model_type == "mistral" && present(root, "sliding_window", value)) {
    return Status::error("sliding-window attention is not supported");
  }
  // Qwen2's attention always has q/k/v biases; Llama's and Mistral's follow attention_bias.
  config.attention_bias = config.model_type == "qwen2";
  if (config.model_type != "qwen2" && root["attention_bias"].get(flag) == simdjson::SUCCESS) {
    config.attention_bias = flag;
  }
  if (root["mlp_bias"].get(flag) == simdjson::SUCCESS) config.mlp_bias = flag;
  if (root["torch_dtype"].get(text) == simdjson::SUCCESS || root["dtype"].get(text) == simdjson::SUCCESS) {
    config.torch_dtype = text;
  }
  if (present(root, "eos_token_id", value)) read_ids(value, config.eos_token_ids);
  return config;
}

Result<ModelConfig> load_model_config(const std::string& dir) {
  std::string text;
  const std::string path = dir + "/config.json";
  if (!read_whole_file(path, text)) return Status::error("cannot read " + cudaagent::quoted(path));
  auto config = parse_model_config(text);
  if (!config) return config.status().with_context(cudaagent::quoted(path));
  return config;
}

std::vector<TokenId> load_eos_token_ids(const std::string& dir, const ModelConfig& config,
                                        const Tokenizer& tokenizer) {
  std::vector<TokenId> ids;
  simdjson::dom::parser parser;
  element root, value;
  if (parser.load(dir + "/generation_config.json").get(root) == simdjson::SUCCESS &&
      present(root, "eos_token_id", value)) {
    read_ids(value, ids);
  }
  ids.insert(ids.end(), config.eos_token_ids.begin(), config.eos_token_ids.end());
  if (parser.load(dir + "/tokenizer_config.json").get(root) == simdjson::SUCCESS) {
    std::string_view eos;
    // A string, or (older files) an object whose content is the token.
    if (root["eos_token"].get(eos) == simdjson::SUCCESS || root["eos_token"]["content"].get(eos) == simdjson::SUCCESS) {
      if (const auto id = tokenizer.token_id(eos)) ids.push_back(*id);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

Result<std::string> rewrite_config_dtype(std::string_view json, std::string_view dtype) {
  simdjson::dom::parser parser;
  simdjson::dom::object root;
  if (parser.parse(json.data(), json.size()).get(root) != simdjson::SUCCESS) {
    return Status::error("config.json is not a JSON object");
  }
  std::string out;
  JsonWriter w(out);
  w.begin_object();
  for (auto field : root) {
    w.key(field.key);
    if (field.key == "torch_dtype" || field.key == "dtype") w.value(dtype);
    else w.raw(simdjson::minify(field.value));
  }
  w.end_object();
  out.push_back('\n');
  return out;
}

}  // namespace cudaagent::train
