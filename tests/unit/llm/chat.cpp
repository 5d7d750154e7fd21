// The chat protocol as data: request bodies carry tools, sampling and vLLM's token fields; replies
// are read with their tool calls, token ids and log-probs in every form servers send them; the
// client's error classification; the <tool_call> text protocol; the base64 token arrays; the
// token-in requests (/tokenize, /v1/completions) and the observation ids between turns.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <cmath>

#include "cudaagent/llm/chat.h"
#include "cudaagent/llm/chat_client.h"
#include "cudaagent/llm/token_array.h"
#include "cudaagent/llm/token_prompt.h"
#include "cudaagent/llm/tool_text.h"

using namespace cudaagent::llm;

namespace {

simdjson::dom::element parse(simdjson::dom::parser& parser, const std::string& text) {
  simdjson::dom::element root;
  REQUIRE(parser.parse(text).get(root) == simdjson::SUCCESS);
  return root;
}

}  // namespace

TEST_CASE("a request body carries messages, tool calls, tools, sampling and vLLM's token fields") {
  ChatRequest request;
  request.model = "m";
  request.messages.push_back({"system", "be brief", {}, {}, {}, {}});
  ChatMessage reply{"assistant", "", {{"call_1", "Read", R"({"file_path":"a"})"}}, {}, {}, "hidden"};
  request.messages.push_back(reply);
  request.messages.push_back({"tool", "1\tx", {}, "call_1", "Read", {}});
  request.tools.push_back({"Read", "reads", R"({"type":"object"})"});
  request.sampling.temperature = 0.5;
  request.sampling.top_k = 20;
  request.sampling.seed = 7;
  request.sampling.stop = {"</s>"};
  request.extra_members = R"("chat_template_kwargs":{"enable_thinking":false})";
  const std::string body = chat_request_body(request);
  simdjson::dom::parser parser;
  auto root = parse(parser, body);
  CHECK(std::string_view(root["model"]) == "m");
  CHECK(std::string_view(root["messages"].at(1)["tool_calls"].at(0)["function"]["arguments"]) ==
        R"({"file_path":"a"})");
  CHECK(std::string_view(root["messages"].at(1)["tool_calls"].at(0)["type"]) == "function");
  CHECK(root["messages"].at(1)["reasoning"].error() == simdjson::NO_SUCH_FIELD);  // never sent back
  CHECK(std::string_view(root["messages"].at(2)["tool_call_id"]) == "call_1");
  CHECK(std::string_view(root["tools"].at(0)["function"]["name"]) == "Read");
  CHECK(std::string_view(root["tool_choice"]) == "auto");
  CHECK(double(root["temperature"]) == 0.5);
  CHECK(int64_t(root["top_k"]) == 20);
  CHECK(int64_t(root["seed"]) == 7);
  CHECK(bool(root["logprobs"]));
  CHECK(int64_t(root["top_logprobs"]) == 0);
  CHECK(bool(root["return_token_ids"]));
  CHECK(bool(root["return_tokens_as_token_ids"]));
  CHECK_FALSE(bool(root["chat_template_kwargs"]["enable_thinking"]));
  CHECK(root["min_p"].error() == simdjson::NO_SUCH_FIELD);

  request.tokens = TokenOptions{false, false};
  request.tools.clear();
  request.extra_members.clear();
  auto plain = parse(parser, chat_request_body(request));
  CHECK(plain["logprobs"].error() == simdjson::NO_SUCH_FIELD);
  CHECK(plain["return_token_ids"].error() == simdjson::NO_SUCH_FIELD);
  CHECK(plain["tools"].error() == simdjson::NO_SUCH_FIELD);
}

TEST_CASE("a vLLM reply gives content, tool calls, sampled ids, prompt ids, log-probs and usage") {
  const std::string body = R"({"id":"c1","model":"qwen","system_fingerprint":"fp","prompt_token_ids":[1,2,3],
    "tokenizer_fingerprint":"tok","chat_template_fingerprint":"tpl",
    "choices":[{"index":0,"finish_reason":"tool_calls","token_ids":[7,8],
      "logprobs":{"content":[{"token":"a","logprob":-0.5},{"token":"b","logprob":-1.25}]},
      "message":{"role":"assistant","content":null,"reasoning_content":"think",
        "tool_calls":[{"id":"x","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls\"}"}},
                      {"type":"function","function":{"name":"Read","arguments":{"file_path":"m.py"}}}]}}],
    "usage":{"prompt_tokens":3,"completion_tokens":2}})";
  auto reply = parse_chat_reply(body);
  REQUIRE(reply);
  const ChatReply& r = reply.value();
  CHECK(r.content.empty());
  CHECK(r.reasoning == "think");
  REQUIRE(r.tool_calls.size() == 2);
  CHECK(r.tool_calls[0].id == "x");
  CHECK(r.tool_calls[0].arguments == R"({"command":"ls"})");
  CHECK(r.tool_calls[1].id == "call_1");                          // made up
  CHECK(r.tool_calls[1].arguments == R"({"file_path":"m.py"})");  // an object, minified
  CHECK(r.finish_reason == "tool_calls");
  CHECK(*r.token_ids == std::vector<std::int32_t>{7, 8});
  CHECK(*r.prompt_token_ids == std::vector<std::int32_t>{1, 2, 3});
  CHECK(*r.logprobs == std::vector<float>{-0.5f, -1.25f});
  CHECK(*r.prompt_tokens == 3);
  CHECK(*r.completion_tokens == 2);
  CHECK(r.model == "qwen");
  CHECK(r.system_fingerprint == "fp");
  CHECK(r.tokenizer_fingerprint == "tok");
  CHECK(r.chat_template_fingerprint == "tpl");
}

TEST_CASE("ids named in logprob entries stand in for token_ids; a null logprob is NaN") {
  auto reply = parse_chat_reply(R"({"choices":[{"message":{"content":"hi"},
    "logprobs":{"content":[{"token":"token_id:5","logprob":-0.1},{"token":"token_id:9","logprob":null}]}}]})");
  REQUIRE(reply);
  CHECK(*reply.value().token_ids == std::vector<std::int32_t>{5, 9});
  REQUIRE(reply.value().logprobs->size() == 2);
  CHECK(std::isnan((*reply.value().logprobs)[1]));
  CHECK_FALSE(reply.value().prompt_token_ids);
  // Token strings that are text: no ids.
  auto text = parse_chat_reply(
      R"({"choices":[{"message":{"content":"hi"},"logprobs":{"content":[{"token":"h","logprob":-1}]}}]})");
  REQUIRE(text);
  CHECK_FALSE(text.value().token_ids);
  CHECK(text.value().logprobs->size() == 1);
}

TEST_CASE("bodies that are not completions are clear errors") {
  CHECK(parse_chat_reply("<html>oops</html>").status().message().find("not JSON") != std::string::npos);
  CHECK(parse_chat_reply(R"({"error":{"message":"model not found"}})").status().message() ==
        "server error: model not found");
  CHECK_FALSE(parse_chat_reply(R"({"choices":[]})"));
  CHECK_FALSE(parse_chat_reply(R"({"choices":[{"text":"completion API"}]})"));
}

TEST_CASE("chat URLs, context overflow and refused token fields are recognised") {
  CHECK(chat_completions_url("http://h:8000") == "http://h:8000/v1/chat/completions");
  CHECK(chat_completions_url("http://h:8000/v1/") == "http://h:8000/v1/chat/completions");
  CHECK(chat_completions_url("http://h/x/chat/completions") == "http://h/x/chat/completions");
  CHECK(is_context_overflow(R"({"message":"This model's maximum context length is 32768 tokens."})"));
  CHECK_FALSE(is_context_overflow(R"({"message":"model not found"})"));
  CHECK(rejects_token_fields("Unrecognized request argument supplied: return_token_ids"));
  CHECK(rejects_token_fields(
      R"({"detail":[{"loc":["body","return_token_ids"],"msg":"Extra inputs are not permitted"}]})"));
  CHECK_FALSE(rejects_token_fields("maximum context length exceeded"));
}

TEST_CASE("<tool_call> blocks are read in order; malformed ones are calls without a name") {
  const std::string content =
      "I will look.\n<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": "
      "\"model.py\"}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"Bash\", \"arguments\": \"{\\\"command\\\": \\\"ls\\\"}\"}</tool_call>"
      "<tool_call>{not json}</tool_call><tool_call>{\"arguments\": {}}</tool_call>"
      "<tool_call>{\"name\": \"Glob\", \"arguments\": {\"pattern\": \"*\"}}";
  const auto calls = parse_text_tool_calls(content, 4);
  REQUIRE(calls.size() == 5);
  CHECK(calls[0].name == "Read");
  CHECK(calls[0].arguments == R"({"file_path":"model.py"})");
  CHECK(calls[0].id == "call_4");
  CHECK(calls[1].name == "Bash");
  CHECK(calls[1].arguments == R"({"command": "ls"})");  // a string is kept as written
  CHECK(calls[2].name.empty());
  CHECK(calls[2].arguments == "{not json}");
  CHECK(calls[3].name.empty());  // no name
  CHECK(calls[4].name.empty());  // unterminated: a reply cut short
  CHECK(parse_text_tool_calls("no calls here").empty());
  const std::string prompt = tools_prompt({{"Read", "reads a file", R"({"type":"object"})"}});
  CHECK(prompt.find("<tool_call>") != std::string::npos);
  CHECK(prompt.find(R"("name":"Read")") != std::string::npos);
  CHECK(tool_response_text("Read", "x") == "<tool_response>\n[Read]\nx\n</tool_response>");
}

TEST_CASE("token arrays round-trip through little-endian base64") {
  CHECK(encode_u32_base64({1}) == "AQAAAA==");
  CHECK(encode_u32_base64({}).empty());
  const std::vector<std::int32_t> ids = {0, 1, 255, 256, 151643, 2147483647};
  CHECK(*decode_u32_base64(encode_u32_base64(ids)) == ids);
  const std::vector<float> lp = {0.0f, -0.25f, -1e-8f, -30.5f};
  CHECK(*decode_f32_base64(encode_f32_base64(lp)) == lp);
  CHECK(encode_u8_base64({1, 0, 1}) == "AQAB");
  CHECK_FALSE(decode_u32_base64("AQA"));       // not a whole base64 quantum
  CHECK_FALSE(decode_u32_base64("AQAB"));      // 3 bytes: not whole words
  CHECK_FALSE(decode_u32_base64("!!!!!!!!"));  // not base64
}

TEST_CASE("token prompts: base URLs, request bodies, completion replies, observation ids") {
  CHECK(cudaagent::llm::server_base_url("http://h:8000/v1/chat/completions") == "http://h:8000");
  CHECK(cudaagent::llm::server_base_url("http://h:8000/v1/") == "http://h:8000");
  CHECK(cudaagent::llm::server_base_url("http://h:8000") == "http://h:8000");
  CompletionRequest request;
  request.model = "m";
  request.prompt_ids = {1, 2, 300000};
  request.sampling.seed = 3;
  simdjson::dom::parser parser;
  auto body = parse(parser, completion_request_body(request));
  CHECK(int64_t(body["prompt"].at(2)) == 300000);
  CHECK(int64_t(body["logprobs"]) == 1);
  CHECK(bool(body["return_token_ids"]));
  CHECK(int64_t(body["seed"]) == 3);
  const std::string tokenize = tokenize_request_body("m", {{"user", "hi", {}, {}, {}, {}}}, {{"Read", "r", "{}"}}, true);
  auto t = parse(parser, tokenize);
  CHECK(bool(t["add_generation_prompt"]));
  CHECK(std::string_view(t["tools"].at(0)["function"]["name"]) == "Read");
  CHECK(parse_tokenize_reply(R"({"tokens":[5,6],"count":2})").value() == std::vector<std::int32_t>{5, 6});
  CHECK_FALSE(parse_tokenize_reply(R"({"detail":"Not Found"})"));

  auto reply = parse_completion_reply(R"({"model":"m","choices":[{"text":"<tool_call>x</tool_call>",
    "finish_reason":"stop","logprobs":{"token_logprobs":[-0.5,null],"tokens":["token_id:7","token_id:8"]}}],
    "usage":{"prompt_tokens":3,"completion_tokens":2}})");
  REQUIRE(reply);
  CHECK(reply.value().content == "<tool_call>x</tool_call>");
  CHECK(*reply.value().token_ids == std::vector<std::int32_t>{7, 8});  // from the named tokens
  CHECK(reply.value().logprobs->size() == 2);
  CHECK(std::isnan((*reply.value().logprobs)[1]));
  CHECK_FALSE(parse_completion_reply(R"({"choices":[{"message":{}}]})"));

  // The template closes the reply with its end-of-turn token 9 and a newline 10; the observation
  // starts with that newline, and it is the rest of the open rendering.
  const std::vector<std::int32_t> closed = {1, 2, 20, 21, 9, 10};
  const std::vector<std::int32_t> open = {1, 2, 20, 21, 9, 10, 30, 31, 1, 2};
  CHECK(observation_ids(closed, open, 9).value() == std::vector<std::int32_t>{10, 30, 31, 1, 2});
  CHECK_FALSE(observation_ids(closed, open, 99));                             // not in the rendering
  CHECK_FALSE(observation_ids(closed, {1, 3, 20, 21, 9, 10, 30}, 9));        // earlier turns re-rendered
}
