// The toy model behind the model seam: what score_response returns agrees with the full logits,
// padding does not change any row's scores, and checkpoints read back exactly.
#include "cudaagent/train/rl_models.h"

#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include "cudaagent/train/rl_batch.h"
#include "cudaagent/train/rl_tensor_io.h"
#include "test_support.h"

using namespace cudaagent;

namespace {

Trajectory make(std::vector<std::int32_t> prompt, std::vector<std::int32_t> response) {
  Trajectory t;
  t.prompt_ids = std::move(prompt);
  t.response_ids = std::move(response);
  t.loss_mask.assign(t.response_ids.size(), 1);
  return t;
}

const c10::Device kCpu(c10::kCPU);

}  // namespace

TEST_CASE("toy specs") {
  auto config = parse_toy_spec("toy:vocab=12,dim=8,seed=0");
  REQUIRE(config);
  CHECK(config.value().vocab == 12);
  CHECK(config.value().dim == 8);
  CHECK(config.value().seed == 0);
  CHECK(config.value().hidden == 64);
  CHECK_FALSE(parse_toy_spec("toy:vocab=0"));
  CHECK_FALSE(parse_toy_spec("toy:colour=3"));
  CHECK_FALSE(load_policy_model("/nonexistent/model", kCpu));
  CHECK(parse_device("cuda:1").value().index() == 1);
  CHECK_FALSE(parse_device("tpu"));
}

TEST_CASE("response scores agree with the logits and ignore padding") {
  ToyPolicyModel model(ToyModelConfig{}, kCpu);
  Trajectory a = make({1, 2, 3, 4}, {5, 6});
  Trajectory b = make({7}, {8, 9, 10, 11});
  RlBatch both = collate({&a, &b});
  RlBatch alone = collate({&b});
  at::NoGradGuard no_grad;
  ResponseScores scores = model.score_response(both.tokens, true);
  ResponseScores single = model.score_response(alone.tokens, true);
  // Row 1 has three columns of left padding in `both`; its scores must not notice.
  CHECK(at::allclose(scores.log_probs[1], single.log_probs[0], 1e-6, 1e-6));
  CHECK(at::allclose(scores.entropy[1], single.entropy[0], 1e-6, 1e-6));
  // Column j scores the token at P + j from the logits at P + j - 1.
  at::Tensor logits = model.logits(both.tokens);
  const std::int64_t p = both.tokens.response_start;
  const double expected = at::log_softmax(logits[0][p], -1)[6].item<double>();
  CHECK(scores.log_probs[0][1].item<double>() == doctest::Approx(expected));
  CHECK(scores.log_probs.requires_grad() == false);
}

TEST_CASE("toy checkpoints read back exactly; critics start from the actor's trunk") {
  testing::TempDir dir;
  ToyModelConfig config;
  config.vocab = 10;
  config.seed = 5;
  ToyPolicyModel model(config, kCpu);
  REQUIRE(model.save(dir.file("actor")));
  auto loaded = load_policy_model(dir.file("actor"), kCpu);
  REQUIRE(loaded);
  auto original = model.parameters();
  auto copy = loaded.value()->parameters();
  REQUIRE(original.size() == copy.size());
  for (std::size_t i = 0; i < original.size(); ++i) CHECK(at::equal(original[i], copy[i]));
  CHECK(copy[0].requires_grad());

  auto critic = load_value_model(dir.file("actor"), kCpu);
  REQUIRE(critic);
  CHECK(at::equal(critic.value()->parameters()[0], original[0]));  // the actor's embedding
  Trajectory t = make({1, 2}, {3, 4});
  RlBatch batch = collate({&t});
  CHECK(critic.value()->values(batch.tokens).abs().sum().item<double>() == 0.0);  // zero head
  REQUIRE(critic.value()->save(dir.file("critic")));
  auto critic_copy = load_value_model(dir.file("critic"), kCpu);
  REQUIRE(critic_copy);
  CHECK(critic_copy.value()->parameter_names().back() == "b_value");
  CHECK_FALSE(load_policy_model(dir.file("critic"), kCpu));  // a value model is not an LM

  // The spec form gives the same trunk as the actor of that spec.
  auto spec_critic = load_value_model("toy:vocab=10,seed=5", kCpu);
  REQUIRE(spec_critic);
  CHECK(at::equal(spec_critic.value()->parameters()[2], original[2]));
}

TEST_CASE("tensor files read back, dtypes and metadata included") {
  testing::TempDir dir;
  NamedTensors contents;
  contents.tensors.emplace_back("a",
                                at::arange(6, at::TensorOptions().dtype(at::kFloat)).view({2, 3}));
  contents.tensors.emplace_back("b", at::tensor({std::int64_t{7}, std::int64_t{-1}}));
  contents.tensors.emplace_back("c", at::ones({3}, at::TensorOptions().dtype(at::kBFloat16)));
  contents.metadata["steps"] = "12";
  REQUIRE(rl_write_tensors(dir.file("t.safetensors"), contents));
  auto read = rl_read_tensors(dir.file("t.safetensors"));
  REQUIRE(read);
  CHECK(read.value().metadata.at("steps") == "12");
  CHECK(at::equal(read.value().find("a"), contents.tensors[0].second));
  CHECK(at::equal(read.value().find("b"), contents.tensors[1].second));
  CHECK((read.value().find("c").scalar_type() == at::kBFloat16));
  CHECK_FALSE(read.value().find("d").defined());

  NamedTensors repeated;
  repeated.tensors.emplace_back("x", at::ones({1}));
  repeated.tensors.emplace_back("x", at::ones({1}));
  CHECK_FALSE(rl_write_tensors(dir.file("r.safetensors"), repeated));
  testing::write_file(dir.file("bad.safetensors"), std::string("\x10\0\0\0\0\0\0\0{}", 10));
  CHECK_FALSE(rl_read_tensors(dir.file("bad.safetensors")));
  testing::write_file(dir.file("short.safetensors"),
                      std::string("\x40\0\0\0\0\0\0\0", 8) +
                          R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})" +
                          std::string(64 - 56, ' ') + "abcd");
  CHECK_FALSE(rl_read_tensors(dir.file("short.safetensors")));
}
