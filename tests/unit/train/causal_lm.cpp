// The model against Hugging Face: per-token log-probabilities and entropies of the fixture
// sequences (up to 542 tokens) within 1e-4 in fp32, the first logits of the last position, and
// greedy continuations (prefill + batched cached decoding) identical to HF generate. Gradients of
// the chunked scores and of recomputed layers equal plain autograd's; a saved checkpoint (sharded,
// with an index) loads back to the same numbers.
#include "cudaagent/train/causal_lm.h"

#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <map>

#include "fixtures.h"

namespace cudaagent::train {
namespace {

using testing::array_of;
using testing::double_list;
using testing::int_list;
using testing::string_of;

std::unique_ptr<CausalLm> load_model(const std::string& dir, const ModelOptions& options = {}) {
  auto model = CausalLm::load(dir, options);
  REQUIRE_MESSAGE(model.is_ok(), model.status().message());
  return std::move(model).value();
}

at::Tensor ids_tensor(const std::vector<std::int32_t>& ids) {
  std::vector<std::int64_t> wide(ids.begin(), ids.end());
  return at::tensor(wide, at::kLong).view({1, -1});
}

double max_abs_difference(const at::Tensor& a, const std::vector<double>& expected) {
  const auto b = at::tensor(expected, at::kDouble);
  return (a.to(at::kDouble).reshape({-1}) - b).abs().max().item<double>();
}

TEST_CASE("log-probabilities, entropies and logits equal Hugging Face's within 1e-4 (fp32)") {
  std::map<std::string, std::unique_ptr<CausalLm>> models;
  simdjson::dom::parser parser;
  int checked = 0;
  double worst = 0;
  for (simdjson::dom::element c : array_of(testing::load_fixture(parser, "logprobs.json"))) {
    const std::string name = string_of(c["model"]);
    if (!models.count(name)) models[name] = load_model(testing::train_fixture(name));
    const CausalLm& model = *models[name];
    const auto ids = int_list(c["ids"]);
    CAPTURE(name);
    CAPTURE(ids.size());
    at::NoGradGuard no_grad;
    const auto scores = model.score_next_tokens(ids_tensor(ids));
    const auto expected_logprobs = double_list(c["token_logprobs"]);
    auto expected_entropy = double_list(c["entropy"]);
    expected_entropy.pop_back();  // the last position has no next token to score
    if (!expected_logprobs.empty()) {
      const double logprob_error = max_abs_difference(scores.logprobs, expected_logprobs);
      CHECK(logprob_error < 1e-4);
      CHECK(max_abs_difference(scores.entropy, expected_entropy) < 1e-4);
      worst = std::max(worst, logprob_error);
    }
    const auto hidden = model.hidden_states(ids_tensor(ids));
    const auto last = model.logits(hidden[0].slice(0, -1)).reshape({-1}).slice(0, 0, 16);
    CHECK(max_abs_difference(last, double_list(c["last_logits_head"])) < 1e-4);
    ++checked;
  }
  CHECK(checked == 15);
  MESSAGE("largest log-probability difference from Hugging Face: " << worst);
}

TEST_CASE("greedy decoding with the cache, three prompts in one batch, equals HF generate") {
  simdjson::dom::parser parser;
  std::map<std::string, std::vector<std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>>>> cases;
  for (simdjson::dom::element c : array_of(testing::load_fixture(parser, "generate.json"))) {
    cases[string_of(c["model"])].emplace_back(int_list(c["prompt"]), int_list(c["output"]));
  }
  REQUIRE(cases.size() == 3);
  for (const auto& [name, prompts] : cases) {
    CAPTURE(name);
    const auto model = load_model(testing::train_fixture(name));
    at::InferenceMode inference;
    const auto n = static_cast<std::int64_t>(prompts.size());
    KvCache cache = model->make_cache(n, 128);
    std::vector<std::int64_t> next(prompts.size()), position(prompts.size());
    std::vector<std::vector<std::int32_t>> outputs(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      const auto h = model->prefill(ids_tensor(prompts[i].first).view({-1}), cache, static_cast<std::int64_t>(i));
      next[i] = model->logits(h.unsqueeze(0)).argmax(-1).item<std::int64_t>();
      position[i] = static_cast<std::int64_t>(prompts[i].first.size());
    }
    for (int step = 0; step < 24; ++step) {
      for (std::size_t i = 0; i < prompts.size(); ++i) outputs[i].push_back(static_cast<std::int32_t>(next[i]));
      if (step == 23) break;
      const auto h = model->decode(at::tensor(next, at::kLong), at::tensor(position, at::kLong), cache);
      const auto chosen = model->logits(h).argmax(-1);
      for (std::size_t i = 0; i < prompts.size(); ++i) {
        next[i] = chosen[static_cast<std::int64_t>(i)].item<std::int64_t>();
        ++position[i];
      }
    }
    for (std::size_t i = 0; i < prompts.size(); ++i) CHECK(outputs[i] == prompts[i].second);
  }
}

// Plain autograd reference: full logits, log_softmax, gather.
at::Tensor reference_loss(const CausalLm& model, const at::Tensor& ids, const at::Tensor& mask, double temperature,
                          const ForwardOptions& forward) {
  const auto hidden = model.hidden_states(ids, forward);
  const auto t = ids.size(1);
  const auto logits = model.logits(hidden.slice(1, 0, t - 1)) / temperature;
  const auto logp = at::log_softmax(logits, -1);
  const auto picked = logp.gather(2, ids.slice(1, 1, t).unsqueeze(2)).squeeze(2);
  const auto entropy = -(logp.exp() * logp).sum(-1);
  return ((picked * 0.7 + entropy * 0.3) * mask.to(at::kFloat)).sum();
}

TEST_CASE("chunked scores and recomputed layers give plain autograd's gradients") {
  ModelOptions options;
  options.trainable = true;
  const auto model = load_model(testing::train_fixture("qwen2-tiny-tied"), options);
  at::manual_seed(5);
  const auto ids = at::randint(0, model->config().vocab_size, {2, 37}, at::kLong);
  auto mask = at::rand({2, 36}) > 0.3;
  const double temperature = 0.8;
  // The second row is left-padded by 6: masked keys and restarted positions in the backward too.
  ForwardOptions forward;
  forward.attention_mask = at::ones({2, 37}, at::kLong);
  forward.attention_mask[1].slice(0, 0, 6).zero_();
  forward.position_ids = (forward.attention_mask.cumsum(1) - 1).clamp_min(0);
  mask[1].slice(0, 0, 6).fill_(false);
  auto gradients = [&](bool chunked, bool recompute) {
    for (auto& p : model->parameters()) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    at::Tensor loss;
    if (chunked) {
      ScoreOptions so;
      so.mask = mask;
      so.temperature = temperature;
      so.chunk_tokens = 7;  // several chunks, the last one short
      so.forward = forward;
      so.forward.recompute = recompute;
      const auto s = model->score_next_tokens(ids, so);
      loss = (s.logprobs * 0.7 + s.entropy * 0.3).sum();
    } else {
      loss = reference_loss(*model, ids, mask, temperature, forward);
    }
    loss.backward();
    std::vector<at::Tensor> out;
    for (auto& p : model->parameters()) out.push_back(p.grad().clone());
    return std::make_pair(loss.item<double>(), out);
  };
  const auto [reference_value, reference] = gradients(false, false);
  for (const bool recompute : {false, true}) {
    CAPTURE(recompute);
    const auto [value, grads] = gradients(true, recompute);
    CHECK(std::abs(value - reference_value) < 1e-3);
    REQUIRE(grads.size() == reference.size());
    double worst = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const double scale = reference[i].abs().max().item<double>() + 1e-6;
      worst = std::max(worst, (grads[i] - reference[i]).abs().max().item<double>() / scale);
    }
    CHECK(worst < 1e-4);
  }
}

TEST_CASE("left padding with position ids and a mask, or right padding, gives each row's own numbers") {
  const auto model = load_model(testing::train_fixture("llama-tiny"));
  at::NoGradGuard no_grad;
  at::manual_seed(9);
  const auto a = at::randint(3, 2000, {1, 9}, at::kLong), b = at::randint(3, 2000, {1, 5}, at::kLong);
  const auto alone_a = model->hidden_states(a), alone_b = model->hidden_states(b);
  ForwardOptions left;
  left.attention_mask = at::ones({2, 9}, at::kLong);
  left.attention_mask[1].slice(0, 0, 4).zero_();
  left.position_ids = (left.attention_mask.cumsum(1) - 1).clamp_min(0);
  const auto batch = at::cat({a, at::cat({at::zeros({1, 4}, at::kLong), b}, 1)}, 0);
  const auto h = model->hidden_states(batch, left);
  CHECK(at::isfinite(h).all().item<bool>());
  CHECK((h[0] - alone_a[0]).abs().max().item<double>() < 1e-5);
  CHECK((h[1].slice(0, 4) - alone_b[0]).abs().max().item<double>() < 1e-5);
  // Without the mask the pads would be attended to: the test can tell the difference.
  ForwardOptions positions_only;
  positions_only.position_ids = left.position_ids;
  CHECK((model->hidden_states(batch, positions_only)[1].slice(0, 4) - alone_b[0]).abs().max().item<double>() > 1e-3);
  const auto right = at::cat({a, at::cat({b, at::zeros({1, 4}, at::kLong)}, 1)}, 0);
  CHECK((model->hidden_states(right)[1].slice(0, 0, 5) - alone_b[0]).abs().max().item<double>() < 1e-5);
}

TEST_CASE("a saved checkpoint (sharded, with an index) loads back to the same numbers") {
  testing::TempDir temp;
  const auto model = load_model(testing::train_fixture("qwen2-tiny"));
  const std::string out = temp.file("saved");
  REQUIRE(model->save(out, "", 300'000).is_ok());
  CHECK(std::filesystem::exists(out + "/model.safetensors.index.json"));
  CHECK(std::filesystem::exists(out + "/tokenizer.json"));
  CHECK(std::filesystem::exists(out + "/chat_template.jinja"));
  CHECK_FALSE(model->save(out).is_ok());  // never over an existing directory
  const auto again = load_model(out);
  std::vector<std::string> names, names_again;
  for (auto& [name, t] : model->named_parameters()) names.push_back(name);
  for (auto& [name, t] : again->named_parameters()) names_again.push_back(name);
  CHECK(names == names_again);
  at::NoGradGuard no_grad;
  const auto ids = at::randint(0, model->config().vocab_size, {1, 50}, at::kLong);
  CHECK(at::equal(model->score_next_tokens(ids).logprobs, again->score_next_tokens(ids).logprobs));

  // bf16: written as BF16 tensors with config.json saying so, and close to fp32.
  const std::string bf16_dir = temp.file("bf16");
  REQUIRE(model->save(bf16_dir, "bfloat16").is_ok());
  CHECK(testing::read_file(bf16_dir + "/config.json").find("\"bfloat16\"") != std::string::npos);
  ModelOptions bf16;
  bf16.dtype = "auto";
  const auto low = load_model(bf16_dir, bf16);
  CHECK((low->dtype() == at::kBFloat16));
  const auto diff = (low->score_next_tokens(ids).logprobs - model->score_next_tokens(ids).logprobs).abs().mean();
  CHECK(diff.item<double>() < 5e-2);
}

TEST_CASE("configs and checkpoints we cannot run are refused by name") {
  CHECK_FALSE(parse_model_config(R"({"model_type": "gpt2"})").is_ok());
  auto scaled = parse_model_config(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "rope_scaling": {"rope_type": "llama3"}})");
  REQUIRE_FALSE(scaled.is_ok());
  CHECK(scaled.status().message().find("llama3") != std::string::npos);
  testing::TempDir temp;
  testing::write_file(temp.file("config.json"), testing::read_file(testing::train_fixture("qwen2-tiny/config.json")));
  auto missing = CausalLm::load(temp.path().string(), {});
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message().find("model.safetensors") != std::string::npos);
  ModelOptions bad_device;
  bad_device.device = "tpu:7";
  CHECK_FALSE(CausalLm::load(testing::train_fixture("qwen2-tiny"), bad_device).is_ok());
}

}  // namespace
}  // namespace cudaagent::train
