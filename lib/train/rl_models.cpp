// The toy model behind the PolicyModel and ValueModel seams, and the loader that picks a model from
// a specification. The toy trunk is an embedding plus a position embedding, their causal mean over
// the real tokens so far, and a tanh layer; heads are linear. It is deterministic for a seed and
// small enough that PPO on it runs in CI.
#include "cudaagent/train/rl_models.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <cmath>
#include <sstream>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/files.h"
#include "cudaagent/base/session.h"
#include "cudaagent/train/rl_math.h"
#include "cudaagent/train/rl_tensor_io.h"

namespace cudaagent {
namespace {

constexpr std::string_view kToyModelType = "cudaagent-toy";

struct Trunk {
  at::Tensor embed;     // (V, D)
  at::Tensor position;  // (positions, D)
  at::Tensor w1;        // (H, 2D)
  at::Tensor b1;        // (H)
};

at::Tensor leaf(const at::Tensor& tensor, c10::Device device) {
  return tensor.to(device).detach().requires_grad_(true);
}

Trunk make_trunk(const ToyModelConfig& config, at::Generator& generator, c10::Device device) {
  Trunk trunk;
  trunk.embed = leaf(at::randn({config.vocab, config.dim}, generator), device);
  trunk.position = leaf(at::randn({config.positions, config.dim}, generator) * 0.1, device);
  const double scale = 1.0 / std::sqrt(2.0 * static_cast<double>(config.dim));
  trunk.w1 = leaf(at::randn({config.hidden, 2 * config.dim}, generator) * scale, device);
  trunk.b1 = leaf(at::zeros({config.hidden}), device);
  return trunk;
}

// (B, L, H) hidden states; column t sees tokens 0..t of its row.
at::Tensor trunk_forward(const Trunk& trunk, std::int64_t positions, const TokenBatch& batch,
                         c10::Device device) {
  at::Tensor ids = batch.input_ids.to(device);
  at::Tensor mask = batch.attention_mask.to(device).to(at::kFloat).unsqueeze(-1);
  at::Tensor pos = batch.position_ids.to(device).clamp(0, positions - 1);
  at::Tensor e = at::embedding(trunk.embed, ids) + at::embedding(trunk.position, pos);
  at::Tensor context = at::cumsum(e * mask, 1) / at::cumsum(mask, 1).clamp_min(1.0);
  return at::tanh(at::linear(at::cat({e, context}, -1), trunk.w1, trunk.b1));
}

// The hidden states that predict the response tokens: columns P-1 .. L-2.
at::Tensor response_window(const at::Tensor& hidden, const TokenBatch& batch) {
  return hidden.narrow(1, batch.response_start - 1, batch.response_length());
}

std::vector<std::pair<std::string, at::Tensor>> trunk_tensors(const Trunk& trunk) {
  return {{"embed", trunk.embed}, {"position", trunk.position}, {"w1", trunk.w1}, {"b1", trunk.b1}};
}

Status save_toy(const std::string& directory, const ToyModelConfig& config, std::string_view head,
                std::vector<std::pair<std::string, at::Tensor>> tensors) {
  if (!make_directories(directory, 0755))
    return Status::error("cannot create " + cudaagent::quoted(directory));
  std::string text;
  JsonWriter json(text);
  json.begin_object().field("model_type", kToyModelType).field("head", head);
  json.field("vocab", config.vocab).field("dim", config.dim).field("hidden", config.hidden);
  json.field("positions", config.positions).end_object();
  text.push_back('\n');
  if (!write_file_atomically(directory + "/config.json", text)) {
    return Status::error("cannot write " + cudaagent::quoted(directory + "/config.json"));
  }
  NamedTensors contents;
  contents.tensors = std::move(tensors);
  contents.metadata["format"] = "pt";
  return rl_write_tensors(directory + "/model.safetensors", contents);
}

class ToyValueModel final : public ValueModel {
 public:
  ToyValueModel(const ToyModelConfig& config, Trunk trunk, c10::Device device)
      : config_(config), trunk_(std::move(trunk)), device_(device) {
    w_value_ = leaf(at::zeros({1, config.hidden}), device);
    b_value_ = leaf(at::zeros({1}), device);
  }
  std::vector<at::Tensor> parameters() override {
    return {trunk_.embed, trunk_.position, trunk_.w1, trunk_.b1, w_value_, b_value_};
  }
  std::vector<std::string> parameter_names() const override {
    return {"embed", "position", "w1", "b1", "w_value", "b_value"};
  }
  c10::Device device() const override { return device_; }
  std::int64_t vocab_size() const override { return config_.vocab; }
  Status save(const std::string& directory) const override {
    auto tensors = trunk_tensors(trunk_);
    tensors.emplace_back("w_value", w_value_);
    tensors.emplace_back("b_value", b_value_);
    return save_toy(directory, config_, "value", std::move(tensors));
  }
  at::Tensor values(const TokenBatch& batch) override {
    at::Tensor hidden =
        response_window(trunk_forward(trunk_, config_.positions, batch, device_), batch);
    return at::linear(hidden, w_value_, b_value_).squeeze(-1);
  }
  void set_head(const at::Tensor& w, const at::Tensor& b) {
    w_value_ = leaf(w, device_);
    b_value_ = leaf(b, device_);
  }

 private:
  ToyModelConfig config_;
  Trunk trunk_;
  c10::Device device_;
  at::Tensor w_value_;
  at::Tensor b_value_;
};

Result<std::int64_t> positive_field(simdjson::dom::object config, std::string_view key) {
  std::int64_t value = 0;
  if (config[key].get_int64().get(value) || value <= 0) {
    return Status::error("config.json: " + std::string(key) + " is missing or not positive");
  }
  return value;
}

struct ToyCheckpoint {
  ToyModelConfig config;
  std::string head;
  NamedTensors tensors;
};

// Whether `directory` holds a toy checkpoint rather than a Hugging Face one (a directory without a
// readable config.json counts as a toy, whose reader then says what is wrong).
bool is_toy_directory(const std::string& directory) {
  std::string text;
  if (!read_whole_file(directory + "/config.json", text)) return true;
  simdjson::dom::parser parser;
  simdjson::dom::object config;
  std::string_view model_type;
  if (parser.parse(text).get(config) || config["model_type"].get_string().get(model_type)) return true;
  return model_type == kToyModelType;
}

// Reads a directory's config.json; `model_type` is set even when it is not the toy's.
Result<ToyCheckpoint> read_toy_checkpoint(const std::string& directory) {
  std::string text;
  if (!read_whole_file(directory + "/config.json", text)) {
    return Status::error("cannot read " + cudaagent::quoted(directory + "/config.json"));
  }
  simdjson::dom::parser parser;
  simdjson::dom::object config;
  if (parser.parse(text).get(config))
    return Status::error(cudaagent::quoted(directory + "/config.json") + " is not a JSON object");
  std::string_view model_type;
  if (config["model_type"].get_string().get(model_type)) model_type = "";
  if (model_type != kToyModelType) {
    return Status::error(cudaagent::quoted(directory) + ": model_type '" + std::string(model_type) +
                         "' is not supported by this build's RL stages");
  }
  ToyCheckpoint out;
  std::string_view head;
  if (config["head"].get_string().get(head)) head = "lm";
  out.head = std::string(head);
  for (auto [key, target] :
       {std::pair{"vocab", &out.config.vocab}, std::pair{"dim", &out.config.dim},
        std::pair{"hidden", &out.config.hidden}, std::pair{"positions", &out.config.positions}}) {
    auto value = positive_field(config, key);
    if (!value) return value.status().with_context(cudaagent::quoted(directory));
    *target = value.value();
  }
  auto tensors = rl_read_tensors(directory + "/model.safetensors");
  if (!tensors) return tensors.status();
  out.tensors = std::move(tensors.value());
  return out;
}

Result<Trunk> trunk_from(const ToyCheckpoint& checkpoint, c10::Device device) {
  Trunk trunk;
  for (auto [name, target] :
       {std::pair{"embed", &trunk.embed}, std::pair{"position", &trunk.position},
        std::pair{"w1", &trunk.w1}, std::pair{"b1", &trunk.b1}}) {
    at::Tensor tensor = checkpoint.tensors.find(name);
    if (!tensor.defined())
      return Status::error("toy checkpoint lacks tensor " + cudaagent::quoted(name));
    *target = leaf(tensor, device);
  }
  return trunk;
}

bool is_toy_spec(const std::string& spec) { return spec.rfind("toy:", 0) == 0 || spec == "toy"; }

}  // namespace

struct ToyPolicyModel::Weights {
  ToyModelConfig config;
  c10::Device device;
  Trunk trunk;
  at::Tensor w_out;  // (V, H)
  at::Tensor b_out;  // (V)
};

Result<ToyModelConfig> parse_toy_spec(const std::string& spec) {
  ToyModelConfig config;
  if (!is_toy_spec(spec)) return Status::error("not a toy model spec: " + cudaagent::quoted(spec));
  std::stringstream items(spec.size() > 4 ? spec.substr(4) : std::string());
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const auto equals = item.find('=');
    const std::string key = item.substr(0, equals);
    std::int64_t value = -1;
    try {
      if (equals != std::string::npos) value = std::stoll(item.substr(equals + 1));
    } catch (const std::exception&) {
      value = -1;
    }
    if (value <= 0 && key != "seed")
      return Status::error("toy spec: bad value in " + cudaagent::quoted(item));
    if (key == "vocab")
      config.vocab = value;
    else if (key == "dim")
      config.dim = value;
    else if (key == "hidden")
      config.hidden = value;
    else if (key == "positions")
      config.positions = value;
    else if (key == "seed" && value >= 0)
      config.seed = static_cast<std::uint64_t>(value);
    else
      return Status::error("toy spec: unknown or bad key in " + cudaagent::quoted(item));
  }
  return config;
}

ToyPolicyModel::ToyPolicyModel(const ToyModelConfig& config, c10::Device device)
    : weights_(new Weights{config, device, {}, {}, {}}) {
  at::Generator generator = at::detail::createCPUGenerator(config.seed);
  weights_->trunk = make_trunk(config, generator, device);
  const double scale = 0.1 / std::sqrt(static_cast<double>(config.hidden));
  weights_->w_out = leaf(at::randn({config.vocab, config.hidden}, generator) * scale, device);
  weights_->b_out = leaf(at::zeros({config.vocab}), device);
}

ToyPolicyModel::~ToyPolicyModel() = default;

std::vector<at::Tensor> ToyPolicyModel::parameters() {
  const auto& w = *weights_;
  return {w.trunk.embed, w.trunk.position, w.trunk.w1, w.trunk.b1, w.w_out, w.b_out};
}

std::vector<std::string> ToyPolicyModel::parameter_names() const {
  return {"embed", "position", "w1", "b1", "w_out", "b_out"};
}

c10::Device ToyPolicyModel::device() const { return weights_->device; }
std::int64_t ToyPolicyModel::vocab_size() const { return weights_->config.vocab; }
const ToyModelConfig& ToyPolicyModel::config() const { return weights_->config; }

Status ToyPolicyModel::save(const std::string& directory) const {
  auto tensors = trunk_tensors(weights_->trunk);
  tensors.emplace_back("w_out", weights_->w_out);
  tensors.emplace_back("b_out", weights_->b_out);
  return save_toy(directory, weights_->config, "lm", std::move(tensors));
}

Status ToyPolicyModel::assign(const NamedTensors& tensors) {
  auto& w = *weights_;
  for (auto [name, target] :
       {std::pair{"embed", &w.trunk.embed}, std::pair{"position", &w.trunk.position},
        std::pair{"w1", &w.trunk.w1}, std::pair{"b1", &w.trunk.b1}, std::pair{"w_out", &w.w_out},
        std::pair{"b_out", &w.b_out}}) {
    at::Tensor tensor = tensors.find(name);
    if (!tensor.defined()) return Status::error("no tensor " + cudaagent::quoted(name));
    if (tensor.sizes() != target->sizes())
      return Status::error("tensor " + cudaagent::quoted(name) + " has another shape");
    *target = leaf(tensor.to(target->scalar_type()), w.device);
  }
  return Status::ok();
}

at::Tensor ToyPolicyModel::logits(const TokenBatch& batch) {
  const auto& w = *weights_;
  at::Tensor hidden = trunk_forward(w.trunk, w.config.positions, batch, w.device);
  return at::linear(hidden, w.w_out, w.b_out);
}

ResponseScores ToyPolicyModel::score_response(const TokenBatch& batch, bool with_entropy) {
  const auto& w = *weights_;
  at::Tensor hidden =
      response_window(trunk_forward(w.trunk, w.config.positions, batch, w.device), batch);
  at::Tensor logits = at::linear(hidden, w.w_out, w.b_out);
  at::Tensor targets =
      batch.input_ids.to(w.device).narrow(1, batch.response_start, batch.response_length());
  ResponseScores scores;
  scores.log_probs = log_probs_from_logits(logits, targets);
  if (with_entropy) scores.entropy = entropy_from_logits(logits);
  return scores;
}

namespace {

Status toy_computes_in_float32(c10::ScalarType compute) {
  if (compute == c10::kFloat) return Status::ok();
  return Status::error(std::string("the toy model computes in float32 only, not ") +
                       compute_dtype_name(compute));
}

}  // namespace

bool is_toy_model(const std::string& spec) { return is_toy_spec(spec) || is_toy_directory(spec); }

Result<std::unique_ptr<PolicyModel>> load_policy_model(const std::string& spec, c10::Device device,
                                                       c10::ScalarType compute) {
  if (!is_toy_model(spec)) return load_causal_lm_policy(spec, device, compute);
  if (auto status = toy_computes_in_float32(compute); !status) return status;
  if (is_toy_spec(spec)) {
    auto config = parse_toy_spec(spec);
    if (!config) return config.status();
    return std::unique_ptr<PolicyModel>(new ToyPolicyModel(config.value(), device));
  }
  auto checkpoint = read_toy_checkpoint(spec);
  if (!checkpoint) return checkpoint.status();
  if (checkpoint.value().head != "lm")
    return Status::error(cudaagent::quoted(spec) + " holds a value model, not a causal LM");
  auto model = std::make_unique<ToyPolicyModel>(checkpoint.value().config, device);
  if (auto status = model->assign(checkpoint.value().tensors); !status) {
    return status.with_context(cudaagent::quoted(spec));
  }
  return std::unique_ptr<PolicyModel>(std::move(model));
}

Result<std::unique_ptr<ValueModel>> load_value_model(const std::string& spec, c10::Device device,
                                                     c10::ScalarType compute) {
  if (!is_toy_model(spec)) return load_causal_lm_value(spec, device, compute);
  if (auto status = toy_computes_in_float32(compute); !status) return status;
  if (is_toy_spec(spec)) {
    auto config = parse_toy_spec(spec);
    if (!config) return config.status();
    // The same trunk the actor of this spec starts from: the generator runs through the same
    // draws in the same order.
    at::Generator generator = at::detail::createCPUGenerator(config.value().seed);
    Trunk trunk = make_trunk(config.value(), generator, device);
    return std::unique_ptr<ValueModel>(new ToyValueModel(config.value(), std::move(trunk), device));
  }
  auto checkpoint = read_toy_checkpoint(spec);
  if (!checkpoint) return checkpoint.status();
  auto trunk = trunk_from(checkpoint.value(), device);
  if (!trunk) return trunk.status();
  auto model =
      std::make_unique<ToyValueModel>(checkpoint.value().config, std::move(trunk.value()), device);
  if (checkpoint.value().head == "value") {
    at::Tensor w = checkpoint.value().tensors.find("w_value");
    at::Tensor b = checkpoint.value().tensors.find("b_value");
    if (!w.defined() || !b.defined())
      return Status::error(cudaagent::quoted(spec) + ": toy checkpoint lacks its value head");
    model->set_head(w, b);
  }
  return std::unique_ptr<ValueModel>(std::move(model));
}

const char* compute_dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat: return "float32";
    case c10::kBFloat16: return "bfloat16";
    case c10::kHalf: return "float16";
    default: return "unsupported";
  }
}

Result<c10::Device> parse_device(const std::string& name) {
  try {
    return c10::Device(name);
  } catch (const std::exception&) {
    return Status::error("unknown device " + cudaagent::quoted(name) + " (cpu, cuda, cuda:N)");
  }
}

}  // namespace cudaagent
