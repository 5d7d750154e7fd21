// The token ledger on synthetic turns: one exact sequence when each prompt extends the last, the
// per-turn reconstruction when a prompt re-tokenises earlier text, and the degraded statuses when
// a server gives fewer ids.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <cmath>

#include "cudaagent/llm/token_array.h"
#include "cudaagent/rollout/token_ledger.h"

using cudaagent::JsonWriter;
using cudaagent::llm::ChatReply;
using cudaagent::rollout::TokenLedger;
using cudaagent::rollout::TokenStatus;

namespace {

ChatReply turn(std::vector<std::int32_t> prompt, std::vector<std::int32_t> reply, bool logprobs = true) {
  ChatReply r;
  r.prompt_token_ids = std::move(prompt);
  if (logprobs) r.logprobs = std::vector<float>(reply.size(), -0.5f);
  r.token_ids = std::move(reply);
  return r;
}

std::string json_of(const TokenLedger& ledger, bool base64) {
  std::string out;
  JsonWriter w(out);
  ledger.write_json(w, base64);
  return out;
}

}  // namespace

TEST_CASE("prompts that extend the last sequence give one exact sequence with a loss mask") {
  TokenLedger ledger;
  ledger.add_turn(turn({1, 2, 3}, {10, 11}), 0, 2, 2);
  ledger.add_turn(turn({1, 2, 3, 10, 11, 4, 5}, {12}), 3, 4, 4);
  ledger.add_turn(turn({1, 2, 3, 10, 11, 4, 5, 12, 6}, {13, 14}, false), 5, 6, 6);
  CHECK(ledger.status() == TokenStatus::kExact);
  CHECK(ledger.prompt_ids() == std::vector<std::int32_t>{1, 2, 3});
  CHECK(ledger.response_ids() == std::vector<std::int32_t>{10, 11, 4, 5, 12, 6, 13, 14});
  CHECK(ledger.loss_mask() == std::vector<std::uint8_t>{1, 1, 0, 0, 1, 0, 1, 1});
  const auto& lp = ledger.logprobs();
  REQUIRE(lp.size() == 8);
  CHECK(lp[0] == -0.5f);
  CHECK(lp[2] == 0.0f);                             // observation
  CHECK((std::isnan(lp[6]) && std::isnan(lp[7])));  // a reply without log-probs
  CHECK(ledger.context_tokens() == 11);

  const std::string base64 = json_of(ledger, true);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  REQUIRE(parser.parse(base64).get(root) == simdjson::SUCCESS);
  CHECK(std::string_view(root["status"]) == "exact");
  CHECK(*cudaagent::llm::decode_u32_base64(std::string_view(root["response_ids"])) == ledger.response_ids());
  CHECK(std::string_view(root["loss_mask"]) == cudaagent::llm::encode_u8_base64(ledger.loss_mask()));
  simdjson::dom::array segments = root["segments"];
  REQUIRE(segments.size() == 6);
  CHECK(std::string_view(segments.at(2)["kind"]) == "observation");
  CHECK(int64_t(segments.at(2)["start"]) == 2);
  CHECK(int64_t(segments.at(2)["length"]) == 2);
  CHECK(int64_t(segments.at(2)["messages"].at(0)) == 3);
  CHECK(int64_t(segments.at(5)["start"]) == 6);
  CHECK(int64_t(root["turns"].at(2)["prompt_reused"]) == 8);
  CHECK_FALSE(bool(root["turns"].at(2)["logprobs"]));

  const std::string plain = json_of(ledger, false);
  REQUIRE(parser.parse(plain).get(root) == simdjson::SUCCESS);
  CHECK(int64_t(root["response_ids"].at(4)) == 12);
  CHECK(root["logprobs"].at(6).is_null());  // NaN is written as null
}

TEST_CASE("a prompt that re-tokenises earlier text is drift, and each turn's prompt stays exact") {
  TokenLedger ledger;
  ledger.add_turn(turn({1, 2}, {10, 11}), 0, 2, 2);
  ledger.add_turn(turn({1, 2, 99, 4}, {12}), 3, 4, 4);  // the template rewrote the reply as 99
  CHECK(ledger.status() == TokenStatus::kDrift);
  // Turn 1's prompt is turn 0's sequence cut to prompt_reused = 2, then what it added: {99, 4}.
  CHECK(ledger.response_ids() == std::vector<std::int32_t>{10, 11, 99, 4, 12});
  CHECK(ledger.loss_mask() == std::vector<std::uint8_t>{1, 1, 0, 0, 1});
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  REQUIRE(parser.parse(json_of(ledger, false)).get(root) == simdjson::SUCCESS);
  CHECK(int64_t(root["turns"].at(1)["prompt_reused"]) == 2);
  CHECK(int64_t(root["turns"].at(1)["prompt_added"]) == 2);
}

TEST_CASE("without prompt ids the observations are missing; without reply ids the episode is text-only") {
  TokenLedger missing;
  ChatReply first = turn({1}, {10});
  first.prompt_token_ids.reset();
  first.prompt_tokens = 40;
  first.completion_tokens = 5;
  missing.add_turn(first, 0, 2, 2);
  CHECK(missing.status() == TokenStatus::kObservationsMissing);
  CHECK(missing.response_ids().empty());
  CHECK(missing.context_tokens() == 45);  // from the usage counts
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  REQUIRE(parser.parse(json_of(missing, false)).get(root) == simdjson::SUCCESS);
  CHECK(root["response_ids"].is_null());
  CHECK(int64_t(root["segments"].at(1)["ids"].at(0)) == 10);  // the model's own ids are kept

  TokenLedger text;
  text.add_turn(turn({1}, {10}), 0, 2, 2);
  ChatReply bare;
  text.add_turn(bare, 3, 4, 4);
  CHECK(text.status() == TokenStatus::kTextOnly);
  CHECK(text.response_ids().empty());
  CHECK(TokenLedger().status() == TokenStatus::kTextOnly);
}
