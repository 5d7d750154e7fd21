// The tokenizer against what Hugging Face's `tokenizers` answered for ~100 texts (code, Unicode,
// whitespace runs, special and added tokens): ids exactly equal, decoded text byte-identical.
#include "cudaagent/train/tokenizer.h"

#include <doctest/doctest.h>

#include "fixtures.h"

namespace cudaagent::train {
namespace {

using testing::int_list;
using testing::load_fixture;
using testing::train_fixture;

Tokenizer load_fixture_tokenizer(const std::string& dir) {
  auto tokenizer = Tokenizer::load(train_fixture(dir));
  REQUIRE_MESSAGE(tokenizer.is_ok(), tokenizer.status().message());
  return std::move(tokenizer).value();
}

TEST_CASE("tokenizer ids and decoded text equal Hugging Face's on every fixture case") {
  // Both copies: the one the fixture script wrote and the one transformers saved with a model.
  for (const std::string dir : {"tokenizer", "qwen2-tiny"}) {
    CAPTURE(dir);
    const Tokenizer tokenizer = load_fixture_tokenizer(dir);
    simdjson::dom::parser parser;
    const auto cases = load_fixture(parser, "tokenizer_cases.json");
    CHECK(tokenizer.size() == testing::int_of(cases["vocab_size"]));
    int checked = 0;
    for (simdjson::dom::element c : testing::array_of(cases["cases"])) {
      const std::string text = testing::string_of(c["text"]);
      CAPTURE(text);
      const auto expected = int_list(c["ids"]);
      auto ids = tokenizer.encode(text);
      REQUIRE(ids.is_ok());
      CHECK(ids.value() == expected);
      CHECK(tokenizer.decode(expected) == testing::string_of(c["decoded"]));
      ++checked;
    }
    CHECK(checked > 80);
  }
}

TEST_CASE("special tokens are matched in text and can be skipped when decoding") {
  const Tokenizer tokenizer = load_fixture_tokenizer("tokenizer");
  const auto im_start = tokenizer.token_id("<|im_start|>");
  REQUIRE(im_start.has_value());
  CHECK(tokenizer.is_special(*im_start));
  const auto tool_call = tokenizer.token_id("<tool_call>");
  REQUIRE(tool_call.has_value());
  CHECK_FALSE(tokenizer.is_special(*tool_call));
  auto ids = tokenizer.encode("<|im_start|>user<tool_call>");
  REQUIRE(ids.is_ok());
  CHECK(ids.value().front() == *im_start);
  CHECK(ids.value().back() == *tool_call);
  CHECK(tokenizer.decode(ids.value(), /*skip_special=*/true) == "user<tool_call>");
  CHECK(tokenizer.sha256().size() == 64);
}

TEST_CASE("text that is not UTF-8 is refused, and lossy decoding replaces maximal subparts") {
  const Tokenizer tokenizer = load_fixture_tokenizer("tokenizer");
  CHECK_FALSE(tokenizer.encode("bad \xff byte").is_ok());
  // "é" is two bytes; half of it decodes to U+FFFD, both halves to the letter.
  auto ids = tokenizer.encode("\xc3\xa9");
  REQUIRE(ids.is_ok());
  CHECK(tokenizer.decode(ids.value()) == "\xc3\xa9");
  CHECK(utf8_lossy("a\xe2\x82z") == "a\xEF\xBF\xBDz");       // truncated 3-byte sequence: one
  CHECK(utf8_lossy("\xf0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD");  // invalid second byte: two
}

TEST_CASE("tokenizer.json parts that are not supported are refused by name") {
  const auto refused = Tokenizer::from_json(
      R"({"model": {"type": "WordPiece", "vocab": {}}, "pre_tokenizer": null, "decoder": null})", "t.json");
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().message().find("WordPiece") != std::string::npos);
  const auto no_byte_level = Tokenizer::from_json(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": null,
          "decoder": {"type": "ByteLevel"}})", "t.json");
  REQUIRE_FALSE(no_byte_level.is_ok());
  CHECK(no_byte_level.status().message().find("ByteLevel") != std::string::npos);
}

}  // namespace
}  // namespace cudaagent::train
