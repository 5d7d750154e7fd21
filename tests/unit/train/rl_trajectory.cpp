// Reading trajectory records (field by field, with the reasons a record is refused) and the rft
// behaviour filters.
#include "cudaagent/train/rl_trajectory.h"

#include <doctest/doctest.h>

#include <string>

using namespace cudaagent;

namespace {

Result<Trajectory> read(const std::string& text, TrajectoryReadOptions options = {}) {
  static simdjson::dom::parser parser;
  simdjson::dom::object object;
  REQUIRE(parser.parse(text).get(object) == simdjson::SUCCESS);
  return read_trajectory(object, options);
}

std::string record(const std::string& trajectory, const std::string& reward = R"({"value":2})") {
  return R"({"id":"e1","task":{"id":"x"},"trajectory":)" + trajectory + R"(,"reward":)" + reward +
         "}";
}

const std::string kMultiTurn =
    R"({"prompt_ids":[1,2,3],"response_ids":[4,5,6,7,8],"loss_mask":[1,1,0,0,1],)"
    R"("logprobs":[-0.5,-1.5,null,null,-0.25],"finish_reason":"stop",)"
    R"("turns":[{"tool_calls":[{"name":"Read","arguments":{"file_path":"a"},"ok":true}]},)"
    R"({"tool_calls":[{"name":"Bash","arguments":{"command":"ls"},"error":"unknown tool"}]}]})";

}  // namespace

TEST_CASE("a multi-turn record is read field by field") {
  TrajectoryReadOptions options;
  options.need_log_probs = true;
  options.read_tool_calls = true;
  auto result = read(record(kMultiTurn), options);
  REQUIRE(result);
  const Trajectory& t = result.value();
  CHECK(t.id == "e1");
  CHECK(t.prompt_ids == std::vector<std::int32_t>{1, 2, 3});
  CHECK(t.response_ids.size() == 5);
  CHECK(t.loss_mask == std::vector<std::uint8_t>{1, 1, 0, 0, 1});
  CHECK(t.trainable_tokens() == 3);
  CHECK(t.behaviour_log_probs == std::vector<float>{-0.5F, -1.5F, 0.0F, 0.0F, -0.25F});
  CHECK(t.finish_reason == "stop");
  CHECK(t.reward == 2.0);
  REQUIRE(t.tool_calls.size() == 2);
  CHECK(t.tool_calls[0].valid);
  CHECK(t.tool_calls[0].arguments == R"({"file_path":"a"})");
  CHECK_FALSE(t.tool_calls[1].valid);
}

TEST_CASE("records that cannot be trained on say why") {
  auto reason = [](const std::string& text, TrajectoryReadOptions options = {}) {
    auto result = read(text, options);
    REQUIRE_FALSE(result);
    return result.status().message();
  };
  CHECK(reason(R"({"id":"x","reward":{"value":1}})") == "trajectory is missing or not an object");
  CHECK(reason(record(R"({"prompt_ids":[1],"response_ids":[2,3],"loss_mask":[1]})")) ==
        "trajectory.loss_mask has 1 entries for 2 response tokens");
  CHECK(reason(record(R"({"prompt_ids":[1],"response_ids":[2],"loss_mask":[2]})")) ==
        "trajectory.loss_mask[0] is not 0 or 1");
  CHECK(reason(record(R"({"prompt_ids":[1],"response_ids":[2],"loss_mask":[0]})")) ==
        "trajectory has no trainable token");
  CHECK(reason(record(R"({"prompt_ids":[],"response_ids":[2],"loss_mask":[1]})")) ==
        "trajectory.prompt_ids is empty");
  CHECK(reason(record(R"({"prompt_ids":[1,-4],"response_ids":[2],"loss_mask":[1]})")) ==
        "trajectory.prompt_ids[1] is not a token id");
  TrajectoryReadOptions vocab;
  vocab.vocab_size = 8;
  CHECK(reason(record(R"({"prompt_ids":[1],"response_ids":[8],"loss_mask":[1]})"), vocab) ==
        "trajectory.response_ids[0] = 8 is outside the vocabulary (8)");
  CHECK(reason(record(R"({"prompt_ids":[1],"response_ids":[2],"loss_mask":[1]})", "{}")) ==
        "reward.value is missing");
  CHECK(reason(record(R"({"prompt_ids":[1],"response_ids":[2],"loss_mask":[1]})",
                      R"({"value":"3"})")) == "reward.value is not a finite number");
  TrajectoryReadOptions log_probs;
  log_probs.need_log_probs = true;
  CHECK(reason(record(R"({"prompt_ids":[1],"response_ids":[2],"loss_mask":[1]})"), log_probs) ==
        "trajectory.logprobs is missing");
  CHECK(reason(record(R"({"prompt_ids":[1],"response_ids":[2],"loss_mask":[1],"logprobs":[0.5]})"),
               log_probs) ==
        "trajectory.logprobs[0] is not a log-probability (a finite number <= 0)");
  CHECK(reason(record(R"({"prompt_ids":[1],"response_ids":[2],"loss_mask":[1],"logprobs":[null]})"),
               log_probs) ==
        "trajectory.logprobs[0] is not a log-probability (a finite number <= 0)");
}

TEST_CASE("boolean loss masks are accepted") {
  auto result = read(record(R"({"prompt_ids":[1],"response_ids":[2,3],"loss_mask":[true,false]})"));
  REQUIRE(result);
  CHECK(result.value().loss_mask == std::vector<std::uint8_t>{1, 0});
}

TEST_CASE("rft filters: reward, invalid calls and tool-call loops") {
  Trajectory t;
  t.reward = 1.0;
  RftFilter filter;
  CHECK(rft_rejection(t, filter).empty());
  t.reward = 0.0;
  CHECK(rft_rejection(t, filter) == "reward 0 <= 0");
  t.reward = 3.0;
  t.tool_calls = {{"Read", "{\"a\":1}", true}, {"Bash", "{}", false}};
  CHECK(rft_rejection(t, filter) == "invalid tool call 1 (Bash)");
  filter.drop_invalid_calls = false;
  CHECK(rft_rejection(t, filter).empty());
  // Two identical calls in a row are fine, three are a loop; identical but not consecutive are not.
  t.tool_calls = {{"Read", "{\"a\":1}", true},
                  {"Read", "{\"a\":1}", true},
                  {"Edit", "{}", true},
                  {"Read", "{\"a\":1}", true}};
  CHECK(rft_rejection(t, filter).empty());
  t.tool_calls.push_back({"Read", "{\"a\":1}", true});
  t.tool_calls.push_back({"Read", "{\"a\":1}", true});
  CHECK(rft_rejection(t, filter) == "tool-call loop: 3 identical consecutive calls to Read");
  t.tool_calls.back().arguments = "{\"a\":2}";
  CHECK(rft_rejection(t, filter).empty());
  filter.max_identical_calls = 0;
  t.tool_calls.back().arguments = "{\"a\":1}";
  CHECK(rft_rejection(t, filter).empty());
}
