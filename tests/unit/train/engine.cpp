// The serving engine: concurrent greedy requests batched together give HF generate's tokens;
// seeded sampling is reproducible; top-k 1 is greedy; a reload swaps weights between requests and
// refuses a checkpoint of another architecture.
#include "cudaagent/train/engine.h"

#include <doctest/doctest.h>

#include <future>
#include <map>

#include "fixtures.h"

namespace cudaagent::train {
namespace {

using testing::array_of;
using testing::int_list;
using testing::string_of;

using Cases = std::vector<std::pair<std::vector<TokenId>, std::vector<TokenId>>>;

std::map<std::string, Cases> generate_cases() {
  simdjson::dom::parser parser;
  std::map<std::string, Cases> cases;
  for (simdjson::dom::element c : array_of(testing::load_fixture(parser, "generate.json"))) {
    cases[string_of(c["model"])].emplace_back(int_list(c["prompt"]), int_list(c["output"]));
  }
  return cases;
}

std::unique_ptr<Engine> start_engine(const std::string& model, std::int64_t batch = 4) {
  EngineOptions options;
  options.checkpoint = testing::train_fixture(model);
  options.tokenizer = testing::train_fixture("tokenizer");  // only qwen2-tiny carries its own
  options.max_batch = batch;
  options.max_model_len = 256;
  auto engine = Engine::start(options);
  REQUIRE_MESSAGE(engine.is_ok(), engine.status().message());
  return std::move(engine).value();
}

GenerationRequest greedy(const std::vector<TokenId>& prompt, std::int64_t tokens) {
  GenerationRequest request;
  request.prompt = prompt;
  request.sampling.temperature = 0;
  request.sampling.max_tokens = tokens;
  request.sampling.ignore_eos = true;
  request.sampling.logprobs = true;
  return request;
}

TEST_CASE("concurrent greedy requests, decoded in one batch, equal HF generate, and a reload swaps weights") {
  const auto cases = generate_cases();
  const auto engine = start_engine("qwen2-tiny");
  CHECK(engine->info().weights_version == 1);
  auto run_all = [&](const Cases& expected) {
    std::vector<std::future<Result<Completion>>> futures;
    for (int repeat = 0; repeat < 2; ++repeat) {  // six requests over four slots: some wait
      for (const auto& [prompt, output] : expected) {
        futures.push_back(std::async(std::launch::async, [&, prompt = prompt] { return engine->generate(greedy(prompt, 24)); }));
      }
    }
    for (std::size_t i = 0; i < futures.size(); ++i) {
      auto done = futures[i].get();
      REQUIRE_MESSAGE(done.is_ok(), done.status().message());
      CHECK(done.value().ids == expected[i % expected.size()].second);
      CHECK(done.value().finish_reason == "length");
      CHECK(done.value().logprobs.size() == 24);
      CHECK(done.value().logprobs[0] <= 0.0f);
    }
    return futures.size();
  };
  CHECK(run_all(cases.at("qwen2-tiny")) == 6);
  auto reloaded = engine->reload(testing::train_fixture("qwen2-tiny-tied"));
  REQUIRE_MESSAGE(reloaded.is_ok(), reloaded.status().message());
  CHECK(reloaded.value() == 2);
  CHECK(engine->info().checkpoint == testing::train_fixture("qwen2-tiny-tied"));
  run_all(cases.at("qwen2-tiny-tied"));
  auto refused = engine->reload(testing::train_fixture("llama-tiny"));
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().message().find("architecture") != std::string::npos);
  CHECK(engine->info().weights_version == 2);
}

TEST_CASE("seeded sampling is reproducible, top-k 1 is greedy, and bad prompts are refused") {
  const auto engine = start_engine("llama-tiny");
  const auto cases = generate_cases().at("llama-tiny");
  GenerationRequest request = greedy(cases[0].first, 20);
  request.sampling.temperature = 1.0;
  request.sampling.top_p = 0.9;
  request.sampling.seed = 42;
  auto first = engine->generate(request);
  auto second = engine->generate(request);
  REQUIRE(first.is_ok());
  REQUIRE(second.is_ok());
  CHECK(first.value().ids == second.value().ids);
  request.sampling.seed = 43;
  std::vector<TokenId> other;
  for (int i = 0; i < 3 && (other.empty() || other == first.value().ids); ++i) {
    request.sampling.seed = 100 + static_cast<std::uint64_t>(i);
    other = engine->generate(request).value().ids;
  }
  CHECK(other != first.value().ids);  // a random 2,050-token model: three seeds cannot all agree
  request.sampling.top_p = 1.0;
  request.sampling.top_k = 1;
  auto top1 = engine->generate(request);
  REQUIRE(top1.is_ok());
  CHECK(std::vector<TokenId>(top1.value().ids.begin(), top1.value().ids.end()) ==
        std::vector<TokenId>(cases[0].second.begin(), cases[0].second.begin() + 20));
  request.sampling.top_logprobs = 3;
  auto with_top = engine->generate(request);
  REQUIRE(with_top.is_ok());
  REQUIRE(with_top.value().top_logprobs[0].size() == 3);
  CHECK(with_top.value().top_logprobs[0][0].first == with_top.value().ids[0]);  // top-1 sampled
  CHECK_FALSE(engine->generate(greedy({}, 4)).is_ok());
  CHECK_FALSE(engine->generate(greedy({5, 99999}, 4)).is_ok());
  CHECK_FALSE(engine->generate(greedy(std::vector<TokenId>(300, 5), 4)).is_ok());
  // The context bounds a completion: 250 prompt tokens leave 6.
  auto bounded = engine->generate(greedy(std::vector<TokenId>(250, 5), 100));
  REQUIRE(bounded.is_ok());
  CHECK(bounded.value().ids.size() == 6);
  CHECK(bounded.value().finish_reason == "length");
}

TEST_CASE("an end-of-sequence token stops a completion unless ignore_eos") {
  const auto engine = start_engine("qwen2-tiny");
  const auto cases = generate_cases().at("qwen2-tiny");
  // Make the third greedy token a stop token: the completion ends there, the token included.
  auto request = greedy(cases[0].first, 24);
  request.sampling.ignore_eos = false;
  request.sampling.stop_token_ids = {cases[0].second[2]};
  auto stopped = engine->generate(request);
  REQUIRE(stopped.is_ok());
  CHECK(stopped.value().finish_reason == "stop");
  CHECK(stopped.value().ids == std::vector<TokenId>(cases[0].second.begin(), cases[0].second.begin() + 3));
  // The checkpoint's own end-of-sequence id comes from tokenizer_config.json's eos_token.
  const auto eos = engine->info().eos_token_ids;
  CHECK(eos == std::vector<TokenId>{*engine->tokenizer().token_id("<|im_end|>")});
}

}  // namespace
}  // namespace cudaagent::train
