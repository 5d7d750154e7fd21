// The chat-completions wire format: what requests are accepted or refused, tool calls parsed from
// model output the way vLLM's Hermes-style parser does, and the response fields clients read.
#include "cudaagent/train/openai_api.h"

#include <doctest/doctest.h>

#include "fixtures.h"

namespace cudaagent::train {
namespace {

simdjson::dom::element parse(simdjson::dom::parser& parser, const std::string& text) {
  simdjson::dom::element root;
  REQUIRE(parser.parse(text).get(root) == simdjson::SUCCESS);
  return root;
}

TEST_CASE("requests: messages, tools, sampling and vLLM's extensions are read") {
  auto request = parse_chat_completion_request(R"({
    "model": "m", "messages": [{"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                                {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
                                  "function": {"name": "Bash", "arguments": "{\"command\": \"ls\"}"}}]},
                                {"role": "tool", "tool_call_id": "c", "content": "x"}],
    "tools": [{"type": "function", "function": {"name": "Bash"}}], "tool_choice": "none",
    "temperature": 0.5, "top_p": 0.9, "top_k": 40, "max_completion_tokens": 7, "seed": 3, "ignore_eos": true,
    "stop_token_ids": [5], "logprobs": true, "top_logprobs": 2, "return_token_ids": true,
    "return_tokens_as_token_ids": true, "skip_special_tokens": false, "add_generation_prompt": false,
    "stream": false, "n": 1, "stop": [], "frequency_penalty": 0})");
  REQUIRE_MESSAGE(request.is_ok(), request.status().message());
  const ChatCompletionRequest& r = request.value();
  CHECK(r.model == "m");
  REQUIRE(r.prompt.messages.size() == 3);
  CHECK(*r.prompt.messages[0].content == "a\nb");  // text parts joined as vLLM joins them
  CHECK_FALSE(r.prompt.messages[1].content.has_value());
  REQUIRE(r.prompt.messages[1].tool_calls.size() == 1);
  CHECK(r.prompt.messages[1].tool_calls[0].arguments == R"({"command": "ls"})");
  CHECK(r.prompt.messages[1].tool_calls[0].arguments_is_string);
  CHECK(r.prompt.messages[2].tool_call_id == "c");
  CHECK(r.prompt.tools.size() == 1);
  CHECK_FALSE(r.parse_tool_calls);
  CHECK_FALSE(r.prompt.add_generation_prompt);
  CHECK(r.sampling.temperature == 0.5);
  CHECK(r.sampling.top_k == 40);
  CHECK(r.sampling.max_tokens == 7);
  CHECK(r.sampling.seed == 3u);
  CHECK(r.sampling.ignore_eos);
  CHECK(r.sampling.stop_token_ids == std::vector<TokenId>{5});
  CHECK(r.sampling.top_logprobs == 2);
  CHECK(r.return_token_ids);
  CHECK(r.return_tokens_as_token_ids);
  CHECK_FALSE(r.skip_special_tokens);
  auto ids = parse_chat_completion_request(R"({"prompt_token_ids": [1, 2, 3]})");
  REQUIRE(ids.is_ok());
  CHECK(*ids.value().prompt_token_ids == std::vector<TokenId>{1, 2, 3});
}

TEST_CASE("requests asking for what serve does not do are refused, naming the field") {
  const std::pair<const char*, const char*> refused[] = {
      {R"({"messages": [{"role": "user", "content": "x"}], "stream": true})", "stream"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", "'n'"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stop": ["\n"]})", "stop"},
      {R"({"messages": [{"role": "user", "content": "x"}], "presence_penalty": 0.5})", "presence_penalty"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": -1})", "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "text content"},
      {R"({"messages": []})", "messages"},
      {R"({"prompt_token_ids": [1, -2]})", "prompt_token_ids"},
      {R"([1, 2])", "object"},
      {R"({nope)", "not JSON"},
  };
  for (const auto& [body, word] : refused) {
    CAPTURE(body);
    auto request = parse_chat_completion_request(body);
    REQUIRE_FALSE(request.is_ok());
    CHECK(request.status().message().find(word) != std::string::npos);
  }
}

TEST_CASE("tool calls are parsed from output as vLLM's Hermes parser does") {
  auto both = parse_tool_calls("Let me look.\n<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a \\\"q\\\".cu\", \"n\": 1.0}}\n</tool_call>\n"
                               "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}");  // the last unclosed
  REQUIRE(both.calls.size() == 2);
  CHECK(*both.content == "Let me look.\n");
  CHECK(both.calls[0].name == "Read");
  CHECK(both.calls[0].arguments == "{\"file_path\": \"a \\\"q\\\".cu\", \"n\": 1.0}");  // Python's json.dumps
  CHECK(both.calls[1].arguments == "{\"command\": \"ls\"}");
  auto only = parse_tool_calls("<tool_call>{\"name\": \"Bash\", \"arguments\": {}}</tool_call>");
  CHECK_FALSE(only.content.has_value());
  CHECK(only.calls.size() == 1);
  // One malformed call: no calls at all, the whole text is content.
  auto bad = parse_tool_calls("x<tool_call>{\"name\": \"A\", \"arguments\": {}}</tool_call><tool_call>{oops}</tool_call>");
  CHECK(bad.calls.empty());
  CHECK(*bad.content == "x<tool_call>{\"name\": \"A\", \"arguments\": {}}</tool_call><tool_call>{oops}</tool_call>");
  CHECK(parse_tool_calls("<tool_call>{\"arguments\": {}}</tool_call>").calls.empty());  // no name
  CHECK(*parse_tool_calls("plain text").content == "plain text");
}

TEST_CASE("responses carry tool calls, token ids, log-probabilities and vLLM's fields") {
  auto tokenizer = Tokenizer::load(testing::train_fixture("tokenizer"));
  REQUIRE(tokenizer.is_ok());
  const Tokenizer& t = tokenizer.value();
  auto request = parse_chat_completion_request(
      R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "Bash"}}],
          "logprobs": true, "top_logprobs": 1, "return_token_ids": true, "stop_token_ids": [2]})");
  REQUIRE(request.is_ok());
  request.value().model = "served";
  Completion c;
  c.prompt_ids = {1, 2, 3};
  c.ids = t.encode("ok<tool_call>{\"name\": \"Bash\", \"arguments\": {\"command\": \"ls\"}}</tool_call>").value();
  c.ids.push_back(*t.token_id("<|im_end|>"));
  for (const TokenId id : c.ids) {
    c.logprobs.push_back(-0.5f);
    c.top_logprobs.push_back({{id, -0.5f}});
  }
  c.finish_reason = "stop";
  c.weights_version = 4;
  const std::string body = write_chat_completion(request.value(), c, t, "chatcmpl-1", 1700000000);
  simdjson::dom::parser parser;
  const auto root = parse(parser, body);
  const auto choice = root["choices"].at(0);
  CHECK(testing::string_of(choice["message"]["content"]) == "ok");
  CHECK(testing::string_of(choice["message"]["tool_calls"].at(0)["function"]["arguments"]) == "{\"command\": \"ls\"}");
  CHECK(testing::string_of(choice["finish_reason"]) == "tool_calls");
  CHECK(testing::int_of(choice["stop_reason"]) == 2);  // the stop token that ended it
  CHECK(testing::int_list(choice["token_ids"]) == c.ids);
  CHECK(testing::int_list(root["prompt_token_ids"]) == c.prompt_ids);
  CHECK(testing::array_of(choice["logprobs"]["content"]).size() == c.ids.size());
  CHECK(testing::string_of(choice["logprobs"]["content"].at(0)["token"]) == "ok");
  CHECK(testing::int_of(root["usage"]["total_tokens"]) == static_cast<std::int64_t>(3 + c.ids.size()));
  CHECK(testing::int_of(root["weights_version"]) == 4);
  CHECK(testing::string_of(root["model"]) == "served");
  const auto error = parse(parser, write_error(404, "no such model"));
  CHECK(testing::int_of(error["error"]["code"]) == 404);
}

}  // namespace
}  // namespace cudaagent::train
