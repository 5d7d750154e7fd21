// One JSONL record: validation on simdjson's DOM parser (grammar, UTF-8, no NaN/Infinity tokens)
// plus the duplicate-key check simdjson does not do, and the edit every stage makes — set its own
// top-level key while every other member passes through byte for byte.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cudaagent/base/status.h"

namespace cudaagent {

// Parses records; reuse one per thread (the parser's buffers are kept between calls).
class RecordParser {
 public:
  // Parses `line`, which must be followed by kLinePadding readable bytes (LineReader guarantees
  // it). On success the object is valid until the next parse() on this parser. Failures are
  // reasons for an error record: "invalid JSON: ...", "not a JSON object", "duplicate key 'k' in
  // /path".
  Result<simdjson::dom::object> parse(std::string_view line);

 private:
  simdjson::dom::parser parser_;
};

// The first duplicated key in any object of the document, as "'key' in /json/pointer", or nullopt.
std::optional<std::string> find_duplicate_key(simdjson::dom::element root);

// Appends to `out` the record `text` (a valid JSON object, as parsed) with the top-level member
// `key` set to `value_json`: appended as the last member, or, when the record already has the key,
// put in the same place with every other byte unchanged. `value_json` must be valid JSON.
Status append_with_member(std::string& out, std::string_view text, std::string_view key,
                          std::string_view value_json, bool key_exists);

// Where an error record came from.
struct ErrorContext {
  std::string_view stage;    // "reward"
  std::string_view source;   // input path, "-" for stdin
  std::uint64_t line = 0;    // 1-based line in the source
};

// Appends one error record line ('\n'-terminated):
// {"error":{"stage","source","line","reason","raw_prefix"[,"id"]}}. `raw` is any bytes; the first
// 200 are kept, invalid UTF-8 replaced.
void append_error_record(std::string& out, const ErrorContext& where, std::string_view reason,
                         std::string_view raw, std::string_view id = {});

}  // namespace cudaagent
