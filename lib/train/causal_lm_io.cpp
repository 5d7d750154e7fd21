// Loading a CausalLm from safetensors and writing it back. Every tensor the architecture needs is
// checked for presence and shape before anything is copied to the device; tensors the checkpoint
// has beyond those (a stored lm_head of a tied model, old rotary buffers) are ignored.
#include <ATen/ATen.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "causal_lm_weights.h"
#include "cudaagent/base/files.h"
#include "cudaagent/base/session.h"
#include "cudaagent/train/safetensors.h"

namespace cudaagent::train {
namespace {

Result<at::ScalarType> scalar_type_of(DType dtype) {
  switch (dtype) {
    case DType::kF32: return at::kFloat;
    case DType::kBF16: return at::kBFloat16;
    case DType::kF16: return at::kHalf;
    case DType::kF64: return at::kDouble;
    default: return Status::error("weights of dtype " + std::string(dtype_name(dtype)) + " are not supported");
  }
}

Result<DType> dtype_of(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return DType::kF32;
    case at::kBFloat16: return DType::kBF16;
    case at::kHalf: return DType::kF16;
    default: return Status::error("cannot write tensors of this dtype");
  }
}

std::string dtype_text(at::ScalarType type) {
  return type == at::kBFloat16 ? "bfloat16" : type == at::kHalf ? "float16" : "float32";
}

class TensorReader {
 public:
  TensorReader(const Checkpoint& checkpoint, at::Device device, at::ScalarType dtype)
      : checkpoint_(checkpoint), device_(device), dtype_(dtype) {}

  // The tensor `name` with `shape`, converted to the model's device and dtype.
  Result<at::Tensor> read(const std::string& name, std::vector<std::int64_t> shape) const {
    const auto view = checkpoint_.find(name);
    if (!view) return Status::error("the checkpoint has no tensor '" + name + "'");
    if (view->info->shape != shape) {
      std::string want, got;
      for (auto d : shape) want += std::to_string(d) + ",";
      for (auto d : view->info->shape) got += std::to_string(d) + ",";
      return Status::error("tensor '" + name + "' has shape [" + got + "], the config says [" + want + "]");
    }
    auto source_type = scalar_type_of(view->info->dtype);
    if (!source_type) return source_type.status().with_context("tensor '" + name + "'");
    const auto options = at::TensorOptions().dtype(source_type.value());
    at::Tensor host;
    const auto address = reinterpret_cast<std::uintptr_t>(view->bytes.data());
    if (address % dtype_size(view->info->dtype) == 0) {
      host = at::from_blob(const_cast<std::byte*>(view->bytes.data()), shape, options);
    } else {  // an unaligned tensor in the file: copy it out first
      host = at::empty(shape, options);
      std::memcpy(host.data_ptr(), view->bytes.data(), view->bytes.size());
    }
    // copy=true: the result must not alias the mapping, which goes away after loading.
    return host.to(device_, dtype_, /*non_blocking=*/false, /*copy=*/true).contiguous();
  }

  Result<at::Tensor> read_optional(const std::string& name, std::vector<std::int64_t> shape, bool wanted) const {
    if (!wanted) return at::Tensor();
    return read(name, std::move(shape));
  }

 private:
  const Checkpoint& checkpoint_;
  at::Device device_;
  at::ScalarType dtype_;
};

#define CUDAAGENT_TRY_ASSIGN(target, expression) \
  do {                                            \
    auto result_ = (expression);                  \
    if (!result_) return result_.status();        \
    (target) = std::move(result_).value();        \
  } while (false)

Status read_layer(const TensorReader& reader, const ModelConfig& c, std::int64_t index, CausalLm::Layer& layer) {
  const std::string p = "model.layers." + std::to_string(index) + ".";
  const std::int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                     kv = c.num_key_value_heads * c.head_dim, inter = c.intermediate_size;
  CUDAAGENT_TRY_ASSIGN(layer.input_norm, reader.read(p + "input_layernorm.weight", {h}));
  CUDAAGENT_TRY_ASSIGN(layer.post_norm, reader.read(p + "post_attention_layernorm.weight", {h}));
  CUDAAGENT_TRY_ASSIGN(layer.q_w, reader.read(p + "self_attn.q_proj.weight", {q, h}));
  CUDAAGENT_TRY_ASSIGN(layer.k_w, reader.read(p + "self_attn.k_proj.weight", {kv, h}));
  CUDAAGENT_TRY_ASSIGN(layer.v_w, reader.read(p + "self_attn.v_proj.weight", {kv, h}));
  CUDAAGENT_TRY_ASSIGN(layer.o_w, reader.read(p + "self_attn.o_proj.weight", {h, q}));
  CUDAAGENT_TRY_ASSIGN(layer.q_b, reader.read_optional(p + "self_attn.q_proj.bias", {q}, c.attention_bias));
  CUDAAGENT_TRY_ASSIGN(layer.k_b, reader.read_optional(p + "self_attn.k_proj.bias", {kv}, c.attention_bias));
  CUDAAGENT_TRY_ASSIGN(layer.v_b, reader.read_optional(p + "self_attn.v_proj.bias", {kv}, c.attention_bias));
  CUDAAGENT_TRY_ASSIGN(layer.gate_w, reader.read(p + "mlp.gate_proj.weight", {inter, h}));
  CUDAAGENT_TRY_ASSIGN(layer.up_w, reader.read(p + "mlp.up_proj.weight", {inter, h}));
  CUDAAGENT_TRY_ASSIGN(layer.down_w, reader.read(p + "mlp.down_proj.weight", {h, inter}));
  CUDAAGENT_TRY_ASSIGN(layer.gate_b, reader.read_optional(p + "mlp.gate_proj.bias", {inter}, c.mlp_bias));
  CUDAAGENT_TRY_ASSIGN(layer.up_b, reader.read_optional(p + "mlp.up_proj.bias", {inter}, c.mlp_bias));
  CUDAAGENT_TRY_ASSIGN(layer.down_b, reader.read_optional(p + "mlp.down_proj.bias", {h}, c.mlp_bias));
  return Status::ok();
}

// Files that travel with the weights so that the written directory is a whole checkpoint.
constexpr const char* kCompanionFiles[] = {
    "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
    "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt"};

}  // namespace

Result<at::ScalarType> parse_compute_dtype(const std::string& name) {
  if (name == "float32" || name == "fp32") return at::kFloat;
  if (name == "bfloat16" || name == "bf16") return at::kBFloat16;
  if (name == "float16" || name == "fp16") return at::kHalf;
  return Status::error("dtype '" + name + "' is not one of float32, bfloat16, float16");
}

CausalLm::CausalLm() = default;
CausalLm::~CausalLm() = default;
at::Device CausalLm::device() const { return weights_->device; }
at::ScalarType CausalLm::dtype() const { return weights_->dtype; }
at::ScalarType CausalLm::compute_dtype() const { return weights_->compute; }

Result<std::unique_ptr<CausalLm>> CausalLm::load(const std::string& dir, const ModelOptions& options) {
  auto config = load_model_config(dir);
  if (!config) return config.status();
  const ModelConfig& c = config.value();
  std::string dtype_name_text = options.dtype;
  if (dtype_name_text == "auto") dtype_name_text = c.torch_dtype.empty() ? "float32" : c.torch_dtype;
  auto dtype = parse_compute_dtype(dtype_name_text);
  if (!dtype) return dtype.status();
  auto compute = options.compute_dtype.empty() ? dtype : parse_compute_dtype(options.compute_dtype);
  if (!compute) return compute.status();
  auto checkpoint = Checkpoint::open(dir);
  if (!checkpoint) return checkpoint.status();

  std::unique_ptr<CausalLm> model(new CausalLm());
  model->config_ = c;
  model->source_dir_ = dir;
  model->weights_ = std::make_unique<Weights>();
  Weights& w = *model->weights_;
  try {
    w.device = at::Device(options.device);
    w.dtype = dtype.value();
    w.compute = compute.value();
    const TensorReader reader(checkpoint.value(), w.device, w.dtype);
    CUDAAGENT_TRY_ASSIGN(w.embed, reader.read("model.embed_tokens.weight", {c.vocab_size, c.hidden_size}));
    CUDAAGENT_TRY_ASSIGN(w.norm, reader.read("model.norm.weight", {c.hidden_size}));
    if (c.tie_word_embeddings) {
      w.lm_head = w.embed;
    } else {
      CUDAAGENT_TRY_ASSIGN(w.lm_head, reader.read("lm_head.weight", {c.vocab_size, c.hidden_size}));
    }
    w.layers.resize(static_cast<std::size_t>(c.num_hidden_layers));
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (Status s = read_layer(reader, c, i, w.layers[static_cast<std::size_t>(i)]); !s) {
        return s.with_context(cudaagent::quoted(dir));
      }
    }
    // transformers: 1 / base^(arange(0, dim, 2) / dim), in float32 on the device.
    const auto exponents = at::arange(0, c.head_dim, 2, at::TensorOptions().dtype(at::kLong).device(w.device))
                               .to(at::kFloat) / static_cast<double>(c.head_dim);
    w.inv_freq = at::reciprocal(at::pow(c.rope_theta, exponents));
    if (options.trainable) {
      for (at::Tensor& t : model->parameters()) t.set_requires_grad(true);
    }
  } catch (const c10::Error& error) {
    return Status::error("loading " + cudaagent::quoted(dir) + ": " + error.what_without_backtrace());
  }
  return model;
}

std::vector<std::pair<std::string, at::Tensor>> CausalLm::named_parameters() const {
  const Weights& w = *weights_;
  std::vector<std::pair<std::string, at::Tensor>> out;
  out.emplace_back("model.embed_tokens.weight", w.embed);
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    const Layer& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const std::pair<const char*, const at::Tensor*> entries[] = {
        {"input_layernorm.weight", &l.input_norm}, {"post_attention_layernorm.weight", &l.post_norm},
        {"self_attn.q_proj.weight", &l.q_w}, {"self_attn.q_proj.bias", &l.q_b},
        {"self_attn.k_proj.weight", &l.k_w}, {"self_attn.k_proj.bias", &l.k_b},
        {"self_attn.v_proj.weight", &l.v_w}, {"self_attn.v_proj.bias", &l.v_b},
        {"self_attn.o_proj.weight", &l.o_w}, {"mlp.gate_proj.weight", &l.gate_w},
        {"mlp.gate_proj.bias", &l.gate_b}, {"mlp.up_proj.weight", &l.up_w}, {"mlp.up_proj.bias", &l.up_b},
        {"mlp.down_proj.weight", &l.down_w}, {"mlp.down_proj.bias", &l.down_b}};
    for (const auto& [name, tensor] : entries) {
      if (tensor->defined()) out.emplace_back(p + name, *tensor);
    }
  }
  out.emplace_back("model.norm.weight", w.norm);
  if (!config_.tie_word_embeddings) out.emplace_back("lm_head.weight", w.lm_head);
  return out;
}

std::vector<at::Tensor> CausalLm::parameters() const {
  std::vector<at::Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

Status CausalLm::save(const std::string& dir, const std::string& dtype, std::uint64_t max_shard_bytes) const {
  at::ScalarType type = weights_->dtype;
  if (!dtype.empty()) {
    auto parsed = parse_compute_dtype(dtype);
    if (!parsed) return parsed.status();
    type = parsed.value();
  }
  auto file_dtype = dtype_of(type);
  if (!file_dtype) return file_dtype.status();
  std::error_code error;
  if (std::filesystem::exists(dir, error)) return Status::error(cudaagent::quoted(dir) + " already exists");
  const std::string partial = dir + ".partial-" + std::to_string(::getpid());
  std::filesystem::remove_all(partial, error);
  if (!std::filesystem::create_directories(partial, error)) {
    return Status::error("cannot create " + cudaagent::quoted(partial) + ": " + error.message());
  }
  std::vector<TensorToWrite> tensors;
  for (auto& [name, tensor] : named_parameters()) {
    TensorToWrite t;
    t.name = name;
    t.dtype = file_dtype.value();
    t.shape = tensor.sizes().vec();
    t.fill = [source = tensor, type](std::byte* destination) {
      const at::Tensor host = source.detach().to(at::kCPU, type).contiguous();
      std::memcpy(destination, host.data_ptr(), host.nbytes());
    };
    tensors.push_back(std::move(t));
  }
  Status written = Status::ok();
  try {
    written = write_checkpoint_weights(partial, std::move(tensors), max_shard_bytes);
  } catch (const c10::Error& e) {
    written = Status::error(e.what_without_backtrace());
  }
  std::string text;
  if (written && read_whole_file(source_dir_ + "/config.json", text)) {
    auto rewritten = rewrite_config_dtype(text, dtype_text(type));
    if (!rewritten) written = rewritten.status();
    else if (!write_file_atomically(partial + "/config.json", rewritten.value())) written = Status::error("cannot write config.json");
  }
  for (const char* name : kCompanionFiles) {
    if (!written) break;
    const std::string source = source_dir_ + "/" + name;
    if (std::filesystem::is_regular_file(source, error) &&
        !std::filesystem::copy_file(source, partial + "/" + name, error)) {
      written = Status::error("cannot copy " + cudaagent::quoted(source) + ": " + error.message());
    }
  }
  if (written) {
    std::filesystem::rename(partial, dir, error);
    if (error) written = Status::error("cannot rename to " + cudaagent::quoted(dir) + ": " + error.message());
  }
  if (!written) {
    std::filesystem::remove_all(partial, error);
    return written.with_context("saving " + cudaagent::quoted(dir));
  }
  return Status::ok();
}

KvCache CausalLm::make_cache(std::int64_t slots, std::int64_t capacity) const {
  KvCache cache;
  cache.slots = slots;
  cache.capacity = capacity;
  const auto options = at::TensorOptions().dtype(weights_->compute).device(weights_->device);
  for (std::int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    cache.keys.push_back(at::zeros({slots, config_.num_key_value_heads, capacity, config_.head_dim}, options));
    cache.values.push_back(at::zeros({slots, config_.num_key_value_heads, capacity, config_.head_dim}, options));
  }
  return cache;
}

}  // namespace cudaagent::train
