// The ChatML renderer against Hugging Face's apply_chat_template on the fixture conversations
// (system prompts, tools, tool calls with object arguments, consecutive tool results): renderings
// byte-identical and their token ids equal. Also the template fingerprint policy and Python-style
// JSON, which the template's `tojson` depends on.
#include "cudaagent/train/chat_template.h"

#include <doctest/doctest.h>

#include "cudaagent/train/openai_api.h"
#include "cudaagent/train/python_json.h"
#include "cudaagent/train/tokenizer.h"
#include "fixtures.h"

namespace cudaagent::train {
namespace {

using testing::array_of;
using testing::string_of;

ChatPrompt prompt_of(simdjson::dom::element c) {
  ChatPrompt prompt;
  for (simdjson::dom::element m : array_of(c["messages"])) {
    auto message = parse_chat_message(m);
    REQUIRE_MESSAGE(message.is_ok(), message.status().message());
    prompt.messages.push_back(std::move(message).value());
  }
  simdjson::dom::array tools;
  if (c["tools"].get(tools) == simdjson::SUCCESS) {
    for (simdjson::dom::element tool : tools) prompt.tools.push_back(simdjson::minify(tool));
  }
  bool add = false;
  REQUIRE(c["add_generation_prompt"].get(add) == simdjson::SUCCESS);
  prompt.add_generation_prompt = add;
  return prompt;
}

TEST_CASE("ChatML renderings equal Hugging Face's byte for byte, and tokenise to its ids") {
  // Both places a checkpoint keeps its template: tokenizer_config.json and chat_template.jinja.
  for (const std::string dir : {"tokenizer", "qwen2-tiny"}) {
    CAPTURE(dir);
    auto chat = ChatTemplate::load(testing::train_fixture(dir), ChatFormat::kTemplate);
    REQUIRE_MESSAGE(chat.is_ok(), chat.status().message());
    CHECK(chat.value().verified());
    CHECK(chat.value().renderer() == "chatml-tools-v1");
    auto tokenizer = Tokenizer::load(testing::train_fixture(dir));
    REQUIRE(tokenizer.is_ok());
    simdjson::dom::parser parser;
    int checked = 0;
    for (simdjson::dom::element c : array_of(testing::load_fixture(parser, "chat_cases.json"))) {
      auto rendered = chat.value().render(prompt_of(c));
      REQUIRE_MESSAGE(rendered.is_ok(), rendered.status().message());
      CHECK(rendered.value() == string_of(c["rendered"]));
      auto ids = tokenizer.value().encode(rendered.value());
      REQUIRE(ids.is_ok());
      CHECK(ids.value() == testing::int_list(c["ids"]));
      ++checked;
    }
    CHECK(checked == 4);
  }
}

TEST_CASE("a template we do not reproduce is refused unless ChatML is asked for") {
  const std::string other = "{% for m in messages %}{{ m.content }}{% endfor %}";
  auto refused = ChatTemplate::from_text(other, ChatFormat::kTemplate);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().message().find("not one cudaagent reproduces") != std::string::npos);
  auto forced = ChatTemplate::from_text(other, ChatFormat::kChatml);
  REQUIRE(forced.is_ok());
  CHECK_FALSE(forced.value().verified());
  CHECK(forced.value().sha256().size() == 64);
  testing::TempDir empty;
  auto none = ChatTemplate::load(empty.path().string(), ChatFormat::kTemplate);
  REQUIRE_FALSE(none.is_ok());
  CHECK(none.status().message().find("--chat-format chatml") != std::string::npos);
  CHECK(ChatTemplate::load(empty.path().string(), ChatFormat::kChatml).is_ok());
}

TEST_CASE("OpenAI-style string arguments are rendered verbatim, and missing content is an error") {
  auto chat = ChatTemplate::from_text("", ChatFormat::kChatml);
  REQUIRE(chat.is_ok());
  ChatPrompt prompt;
  prompt.add_generation_prompt = false;
  prompt.messages.push_back({"assistant", std::nullopt, {{"c1", "Bash", R"({"command":"ls"})", true}}, ""});
  auto rendered = chat.value().render(prompt);
  REQUIRE(rendered.is_ok());
  CHECK(rendered.value() ==
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\":\"ls\"}}\n"
        "</tool_call><|im_end|>\n");
  prompt.messages = {{"user", std::nullopt, {}, ""}};
  CHECK_FALSE(chat.value().render(prompt).is_ok());
  prompt.messages.clear();
  CHECK_FALSE(chat.value().render(prompt).is_ok());
}

TEST_CASE("Python's json.dumps form: separators, key order, floats, escapes, non-ASCII") {
  auto dumped = python_json_dumps(R"({"b":1,"a":[1.0,0.5,1e-5,1e16,123456789012.25,-0.0,0.0001],"s":"é\n\"\u0001","t":true,"n":null})");
  REQUIRE(dumped.is_ok());
  CHECK(dumped.value() ==
        "{\"b\": 1, \"a\": [1.0, 0.5, 1e-05, 1e+16, 123456789012.25, -0.0, 0.0001], \"s\": \"é\\n\\\"\\u0001\", "
        "\"t\": true, \"n\": null}");
  CHECK_FALSE(python_json_dumps("{nope").is_ok());
  std::string out;
  append_python_float(out, 1e22);
  CHECK(out == "1e+22");
}

}  // namespace
}  // namespace cudaagent::train
