// LLM mode without a server: the URL, the request body, reading a chat completion, and turning a
// model's reply into chains (or into reasons it cannot be used).
#include "cudaagent/synth/llm.h"

#include <doctest/doctest.h>

#include "test_support.h"

using namespace cudaagent;
using namespace cudaagent::synth;

namespace {

const Catalog& catalog() {
  static const Catalog c = [] {
    auto loaded = load_catalog(std::string(CUDAAGENT_SOURCE_DIR) + "/share/synth/operators.json");
    REQUIRE_MESSAGE(loaded, loaded.status().message());
    return std::move(loaded).value();
  }();
  return c;
}

std::vector<int> all() {
  std::vector<int> out;
  for (std::size_t i = 0; i < catalog().ops.size(); ++i) out.push_back(static_cast<int>(i));
  return out;
}

}  // namespace

TEST_CASE("the chat-completions URL from a base URL or a full one") {
  CHECK(chat_completions_url("http://h:8000") == "http://h:8000/v1/chat/completions");
  CHECK(chat_completions_url("http://h:8000/") == "http://h:8000/v1/chat/completions");
  CHECK(chat_completions_url("http://h:8000/v1") == "http://h:8000/v1/chat/completions");
  CHECK(chat_completions_url("http://h/api/v1/chat/completions") == "http://h/api/v1/chat/completions");
}

TEST_CASE("the request names the model, lists the allowed operators and asks for the depth mix") {
  LlmSettings settings;
  settings.model = "qwen \"coder\"";
  settings.per_request = 5;
  const std::vector<int> allowed{*catalog().find("conv2d"), *catalog().find("relu")};
  const std::string body = proposal_request_body(catalog(), allowed, settings, {0, 0.8377, 0.1627}, 9);
  REQUIRE(testing::is_valid_json(body));
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.parse(body);
  CHECK(std::string(root["model"].get_string().value()) == "qwen \"coder\"");
  CHECK(root["seed"].get_int64().value() == 9);
  auto messages = root["messages"].get_array().value();
  REQUIRE(messages.size() == 2);
  const std::string system(messages.at(0)["content"].get_string().value());
  const std::string user(messages.at(1)["content"].get_string().value());
  CHECK(system.find("- conv2d [convolution] rank 4: 2-d convolution") != std::string::npos);
  CHECK(system.find("out_channels, kernel_size, stride, padding, dilation, bias") != std::string::npos);
  CHECK(system.find("- relu [activation] rank >=1") != std::string::npos);
  CHECK(system.find("linear") == std::string::npos);  // not allowed, not offered
  CHECK(user.find("Propose 5 different compositions") != std::string::npos);
  CHECK(user.find("2 operators: 84%, 3 operators: 16%") != std::string::npos);
  CHECK(user.find("1 operator:") == std::string::npos);  // weight 0
}

TEST_CASE("reading a chat completion") {
  auto good = chat_completion_content(R"({"choices":[{"message":{"role":"assistant","content":"hi"}}]})");
  REQUIRE(good);
  CHECK(good.value() == "hi");
  auto garbage = chat_completion_content("<html>502 Bad Gateway</html>");
  REQUIRE_FALSE(garbage);
  CHECK(garbage.status().message().rfind("response is not JSON", 0) == 0);
  CHECK(garbage.status().message().find("<html>502") != std::string::npos);
  auto no_choices = chat_completion_content(R"({"object":"list"})");
  REQUIRE_FALSE(no_choices);
  CHECK(no_choices.status().message() == "response is not a chat completion: no choices");
  auto error = chat_completion_content(R"({"error":{"message":"model not found"}})");
  REQUIRE_FALSE(error);
  CHECK(error.status().message() == "server error: model not found");
  CHECK_FALSE(chat_completion_content(R"({"choices":[{"message":{"content":null}}]})"));
}

TEST_CASE("proposals in prose and code fences, in both JSON forms, with parameters") {
  const std::string reply =
      "Sure! Here you go:\n```json\n{\"compositions\": [[\"conv2d\", \"relu\"], "
      "[{\"op\": \"leaky_relu\", \"params\": {\"negative_slope\": 0.1}}, \"sum\"], "
      "{\"ops\": [\"gelu_tanh\"]}]}\n```\nHope that helps [really].";
  auto proposals = parse_proposals(reply, catalog(), all());
  REQUIRE_MESSAGE(proposals, proposals.status().message());
  REQUIRE(proposals.value().size() == 3);
  const Proposal& first = proposals.value()[0];
  CHECK(first.error.empty());
  REQUIRE(first.chain.size() == 2);
  CHECK(first.chain[0].entry == *catalog().find("conv2d"));
  CHECK(first.raw == R"(["conv2d","relu"])");
  const Proposal& second = proposals.value()[1];
  REQUIRE(second.chain.size() == 2);
  REQUIRE(second.chain[0].params.size() == 1);
  CHECK(second.chain[0].params[0].name == "negative_slope");
  CHECK(second.chain[0].params[0].number == 0.1);
  CHECK(proposals.value()[2].chain.size() == 1);

  auto bare = parse_proposals(R"([["linear", "gelu"]])", catalog(), all());
  REQUIRE(bare);
  CHECK(bare.value()[0].chain.size() == 2);
}

TEST_CASE("a bad proposal is an error of that proposal, the others stay usable") {
  const std::vector<int> allowed{*catalog().find("relu"), *catalog().find("linear")};
  auto proposals = parse_proposals(
      R"({"compositions": [["conv4d", "relu"], ["linear", "relu"], ["linear", "gelu"], [], "relu",
          [{"params": {}}], [{"op": "relu", "params": {"x": [1]}}]]})",
      catalog(), allowed);
  REQUIRE(proposals);
  const auto& p = proposals.value();
  REQUIRE(p.size() == 7);
  CHECK(p[0].error == "unknown operator 'conv4d'");
  CHECK(p[1].error.empty());
  CHECK(p[2].error == "operator 'gelu' is not among the allowed operators");
  CHECK(p[3].error == "the composition is empty");
  CHECK(p[4].error.find("a list of operators") != std::string::npos);
  CHECK(p[5].error == "operator 1 has no \"op\" name");
  CHECK(p[6].error.find("parameter 'x' must be a number") != std::string::npos);
}

TEST_CASE("a reply without usable JSON is an error of the reply") {
  CHECK(parse_proposals("I cannot help with that.", catalog(), all()).status().message() ==
        "the reply holds no JSON");
  CHECK(parse_proposals("{\"answer\": 42}", catalog(), all()).status().message() ==
        "the reply's JSON has no \"compositions\" list");
  CHECK(parse_proposals("[]", catalog(), all()).status().message() ==
        "the reply's list of compositions is empty");
  CHECK_FALSE(parse_proposals("[[\"relu\"", catalog(), all()));
}
