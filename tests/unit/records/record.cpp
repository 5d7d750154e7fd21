#include "cudaagent/records/record.h"

#include <doctest/doctest.h>

#include "cudaagent/records/line_reader.h"
#include "test_support.h"

using cudaagent::append_error_record;
using cudaagent::append_with_member;
using cudaagent::RecordParser;

namespace {

// A parse on a padded copy, as LineReader would provide.
cudaagent::Status parse(RecordParser& parser, const std::string& text) {
  std::string padded = text + std::string(cudaagent::kLinePadding, ' ');
  return parser.parse(std::string_view(padded.data(), text.size())).status();
}

std::string with_member(const std::string& text, std::string_view key, std::string_view value,
                        bool exists) {
  std::string out;
  const auto status = append_with_member(out, text, key, value, exists);
  REQUIRE_MESSAGE(status.is_ok(), status.message());
  return out;
}

}  // namespace

TEST_CASE("RecordParser accepts objects and rejects everything a JSONL record must not be") {
  RecordParser parser;
  CHECK(parse(parser, R"({"id":"a","n":[1,2,{"x":null}]})").is_ok());
  CHECK(parse(parser, "{}").is_ok());

  struct Case {
    const char* name;
    std::string text;
    const char* reason;
  };
  const Case cases[] = {
      {"truncated", R"({"id":"a","n":[1,2)", "invalid JSON"},
      {"NaN token", R"({"t":NaN})", "invalid JSON"},
      {"Infinity token", R"({"t":Infinity})", "invalid JSON"},
      {"-Infinity token", R"({"t":-Infinity})", "invalid JSON"},
      {"invalid UTF-8", "{\"s\":\"\xFF\xFE\"}", "invalid JSON"},
      {"trailing garbage", R"({"a":1} x)", "invalid JSON"},
      {"array", "[1,2]", "not a JSON object"},
      {"number", "42", "not a JSON object"},
      {"duplicate top-level key", R"({"a":1,"b":2,"a":3})", "duplicate key 'a' in /"},
      {"duplicate nested key", R"({"a":{"x":1,"x":2}})", "duplicate key 'x' in /a"},
      {"duplicate in array", R"({"a":[0,{"k":1,"k":1}]})", "duplicate key 'k' in /a/1"},
      {"escaped duplicate", R"({"a":1,"\u0061":2})", "duplicate key 'a'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto status = parse(parser, c.text);
    REQUIRE_FALSE(status.is_ok());
    CHECK(status.message().find(c.reason) != std::string::npos);
  }
}

TEST_CASE("append_with_member appends a new key and leaves every other byte alone") {
  CHECK(with_member(R"({"a": 1.50, "b" : "x"})", "reward", "3", false) ==
        R"({"a": 1.50, "b" : "x","reward":3})");
  CHECK(with_member("{}", "k", "[]", false) == R"({"k":[]})");
  CHECK(with_member("{ }  ", "k", "1", false) == "{ \"k\":1}");
}

TEST_CASE("append_with_member replaces an existing key in place, whatever its value") {
  CHECK(with_member(R"({"reward":1,"b":2})", "reward", "3", true) == R"({"reward":3,"b":2})");
  CHECK(with_member(R"({"a":0,"reward":{"v":[1,{"x":"}"}]},"b":2})", "reward", "{}", true) ==
        R"({"a":0,"reward":{},"b":2})");
  CHECK(with_member(R"({"a":0, "reward" : [1, 2] })", "reward", "null", true) ==
        R"({"a":0, "reward" : null })");
  CHECK(with_member(R"({"a":0,"reward":"s,}"})", "reward", "true", true) ==
        R"({"a":0,"reward":true})");
  CHECK(with_member(R"({"a":0,"reward":-1.5e3 , "z":1})", "reward", "2", true) ==
        R"({"a":0,"reward":2 , "z":1})");
  CHECK(with_member(R"({"a":{"reward":5},"reward":1})", "reward", "2", true) ==
        R"({"a":{"reward":5},"reward":2})");
}

TEST_CASE("append_error_record writes one valid line, whatever the raw bytes") {
  std::string out;
  append_error_record(out, {"reward", "in.jsonl", 7}, "invalid JSON: x", "{\"a\":\"\xFF\n",
                      "task-1");
  REQUIRE(out.back() == '\n');
  out.pop_back();
  CHECK(cudaagent::testing::is_valid_json(out));
  CHECK(out.find(R"("stage":"reward")") != std::string::npos);
  CHECK(out.find(R"("line":7)") != std::string::npos);
  CHECK(out.find(R"("id":"task-1")") != std::string::npos);

  std::string long_raw(1000, 'q');
  std::string second;
  append_error_record(second, {"reward", "-", 1}, "r", long_raw);
  CHECK(second.find(std::string(200, 'q')) != std::string::npos);
  CHECK(second.find(std::string(201, 'q')) == std::string::npos);
}
