#include "cudaagent/base/json_writer.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "test_support.h"

using cudaagent::append_json_number;
using cudaagent::append_json_string;
using cudaagent::JsonWriter;

namespace {
std::string quote(std::string_view bytes) {
  std::string out;
  append_json_string(out, bytes);
  return out;
}
std::string number(double value) {
  std::string out;
  append_json_number(out, value);
  return out;
}
}  // namespace

TEST_CASE("append_json_string escapes quotes, backslashes and control characters") {
  CHECK(quote("plain") == "\"plain\"");
  CHECK(quote("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(quote("\n\r\t\b\f") == "\"\\n\\r\\t\\b\\f\"");
  CHECK(quote(std::string_view("\x01\x1f\0", 3)) == "\"\\u0001\\u001f\\u0000\"");
  CHECK(quote("/") == "\"/\"");
}

TEST_CASE("append_json_string keeps valid UTF-8 and replaces invalid bytes with U+FFFD") {
  CHECK(quote("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80") == "\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  CHECK(quote("\xFF") == "\"\xEF\xBF\xBD\"");
  CHECK(quote("a\xC3") == "\"a\xEF\xBF\xBD\"");                  // truncated sequence
  CHECK(quote("\xC0\xAF") == "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");    // overlong '/'
  CHECK(quote("\xED\xA0\x80") == "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // surrogate
  CHECK(quote("\xF4\x90\x80\x80").find("\xEF\xBF\xBD") != std::string::npos);  // > U+10FFFF
  // Whatever the bytes, the result is valid JSON.
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  CHECK(cudaagent::testing::is_valid_json(quote(all_bytes)));
}

TEST_CASE("append_json_number writes shortest round-trip text and null for non-finite") {
  CHECK(number(1.5) == "1.5");
  CHECK(number(0.1) == "0.1");
  CHECK(number(-2) == "-2");
  CHECK(number(1e300) == "1e+300");
  CHECK(number(std::nan("")) == "null");
  CHECK(number(std::numeric_limits<double>::infinity()) == "null");
  CHECK(number(-std::numeric_limits<double>::infinity()) == "null");
  const double third = 1.0 / 3.0;
  CHECK(std::stod(number(third)) == third);
}

TEST_CASE("JsonWriter places commas and colons for nested containers") {
  std::string out;
  JsonWriter json(out);
  json.begin_object()
      .field("a", 1)
      .key("b").begin_array().value(true).null().value("x").begin_object().end_object().end_array()
      .field("c", 2.5)
      .key("d").begin_object().field("e", std::string_view("f")).end_object()
      .key("g").raw("[1,2]")
      .end_object();
  CHECK(out == R"({"a":1,"b":[true,null,"x",{}],"c":2.5,"d":{"e":"f"},"g":[1,2]})");
  CHECK(cudaagent::testing::is_valid_json(out));
}
