// JsonWriter: the one tested way to produce JSON text. It appends to a std::string,
// escapes every string (invalid UTF-8 becomes U+FFFD, so output is always valid UTF-8) and writes
// non-finite doubles as null, so no writer in the project can emit NaN or Infinity.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cudaagent {

// Appends `bytes` as a quoted JSON string. Any byte sequence is accepted.
void append_json_string(std::string& out, std::string_view bytes);

// Appends the shortest text that reads back as the same double; `null` if it is not finite.
void append_json_number(std::string& out, double value);

// A streaming writer with comma bookkeeping. Misuse (a value where a key is required, unbalanced
// end_*) is a programming error, caught by assertions in debug builds. Not thread-safe.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);

  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(bool flag);
  JsonWriter& value(std::int64_t number);
  JsonWriter& value(int number) { return value(static_cast<std::int64_t>(number)); }
  JsonWriter& value(double number);  // non-finite -> null; the caller adds a flag if it matters
  JsonWriter& null();
  // A value that is already JSON text (validated by the caller, e.g. a span of a parsed record).
  JsonWriter& raw(std::string_view json);

  // Shorthand for key(name).value(v).
  template <class T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

 private:
  void before_value();
  std::string& out_;
  std::vector<bool> has_items_;  // one entry per open container: whether a comma is due
  bool after_key_ = false;
};

}  // namespace cudaagent
