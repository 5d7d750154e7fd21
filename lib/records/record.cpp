// Record validation and editing. simdjson (DOM) validates; duplicate keys are found by walking
// the tape; a member's bytes are located with simdjson's on-demand API (only when a stage must
// replace a key that is already there), so no hand-written JSON scanner exists in the project.
#include "cudaagent/records/record.h"

#include <algorithm>
#include <vector>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/records/line_reader.h"

namespace cudaagent {
namespace {

constexpr std::size_t kRawPrefixBytes = 200;

std::string escape_pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out.push_back(c);
  }
  return out;
}

std::optional<std::string> find_duplicate_in(simdjson::dom::element element, std::string& path,
                                             std::vector<std::string_view>& scratch) {
  using simdjson::dom::element_type;
  if (element.type() == element_type::OBJECT) {
    const simdjson::dom::object object = element.get_object().value_unsafe();
    scratch.clear();
    for (auto field : object) scratch.push_back(field.key);
    if (scratch.size() > 1) {
      std::sort(scratch.begin(), scratch.end());
      auto dup = std::adjacent_find(scratch.begin(), scratch.end());
      if (dup != scratch.end()) {
        std::string where(1, '\'');
        where.append(*dup).append("' in ").append(path.empty() ? std::string_view("/") : path);
        return where;
      }
    }
    for (auto field : object) {
      const auto type = field.value.type();
      if (type != element_type::OBJECT && type != element_type::ARRAY) continue;
      const std::size_t saved = path.size();
      path.push_back('/');
      path.append(escape_pointer_token(field.key));
      if (auto found = find_duplicate_in(field.value, path, scratch)) return found;
      path.resize(saved);
    }
  } else if (element.type() == element_type::ARRAY) {
    std::size_t index = 0;
    const simdjson::dom::array array = element.get_array().value_unsafe();
    for (auto item : array) {
      const auto type = item.type();
      if (type == element_type::OBJECT || type == element_type::ARRAY) {
        const std::size_t saved = path.size();
        path.push_back('/');
        path.append(std::to_string(index));
        if (auto found = find_duplicate_in(item, path, scratch)) return found;
        path.resize(saved);
      }
      ++index;
    }
  }
  return std::nullopt;
}

// The bytes of a value, as a view into the on-demand parser's input.
simdjson::error_code member_raw_json(simdjson::ondemand::value value, std::string_view& raw) {
  simdjson::ondemand::json_type type;
  if (auto error = value.type().get(type)) return error;
  if (type == simdjson::ondemand::json_type::object) {
    simdjson::ondemand::object object;
    if (auto error = value.get_object().get(object)) return error;
    return object.raw_json().get(raw);
  }
  if (type == simdjson::ondemand::json_type::array) {
    simdjson::ondemand::array array;
    if (auto error = value.get_array().get(array)) return error;
    return array.raw_json().get(raw);
  }
  raw = value.raw_json_token();
  return simdjson::SUCCESS;
}

}  // namespace

std::optional<std::string> find_duplicate_key(simdjson::dom::element root) {
  std::string path;
  std::vector<std::string_view> scratch;
  return find_duplicate_in(root, path, scratch);
}

Result<simdjson::dom::object> RecordParser::parse(std::string_view line) {
  simdjson::dom::element root;
  const auto error = parser_.parse(line.data(), line.size(), false).get(root);
  if (error) {
    std::string reason = std::string("invalid JSON: ") + simdjson::error_message(error);
    // The most common writer bug gets a hint; the check is only on the message, never the verdict.
    if (line.find("NaN") != std::string_view::npos || line.find("Infinity") != std::string_view::npos) {
      reason += " (NaN and Infinity are not JSON numbers; writers must emit null)";
    }
    return Status::error(reason);
  }
  if (root.type() != simdjson::dom::element_type::OBJECT) {
    return Status::error("not a JSON object");
  }
  if (auto duplicate = find_duplicate_key(root)) {
    return Status::error("duplicate key " + *duplicate);
  }
  return root.get_object().value_unsafe();
}

Status append_with_member(std::string& out, std::string_view text, std::string_view key,
                          std::string_view value_json, bool key_exists) {
  // Trailing whitespace is not part of the record.
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  if (text.empty() || text.back() != '}') return Status::error("record is not a JSON object");
  if (!key_exists) {
    const std::string_view body = text.substr(0, text.size() - 1);
    // "{" followed only by whitespace means an empty object: no comma before the new member.
    const bool empty = body.find_first_not_of(" \t\r\n", 1) == std::string_view::npos;
    out.append(body);
    if (!empty) out.push_back(',');
    append_json_string(out, key);
    out.push_back(':');
    out.append(value_json);
    out.push_back('}');
    return Status::ok();
  }
  // Replace the existing member's value in place: find its byte span with the on-demand parser.
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(text);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc)) return Status::error("record is not valid JSON");
  simdjson::ondemand::object object;
  if (doc.get_object().get(object)) return Status::error("record is not a JSON object");
  for (auto field : object) {
    std::string_view field_key;
    if (field.unescaped_key().get(field_key)) return Status::error("record has an unreadable key");
    if (field_key != key) continue;
    std::string_view raw;
    if (member_raw_json(field.value(), raw)) return Status::error("cannot locate member in record");
    const auto begin = static_cast<std::size_t>(raw.data() - padded.data());
    std::size_t end = begin + raw.size();
    while (end > begin && (text[end - 1] == ' ' || text[end - 1] == '\t' || text[end - 1] == '\n' ||
                           text[end - 1] == '\r')) {
      --end;  // scalar tokens come with the whitespace that follows them
    }
    out.append(text.substr(0, begin));
    out.append(value_json);
    out.append(text.substr(end));
    return Status::ok();
  }
  return Status::error("record has no member '" + std::string(key) + "' to replace");
}

void append_error_record(std::string& out, const ErrorContext& where, std::string_view reason,
                         std::string_view raw, std::string_view id) {
  JsonWriter json(out);
  json.begin_object().key("error").begin_object();
  json.field("stage", where.stage).field("source", where.source);
  json.field("line", static_cast<std::int64_t>(where.line)).field("reason", reason);
  json.field("raw_prefix", raw.substr(0, std::min(raw.size(), kRawPrefixBytes)));
  if (!id.empty()) json.field("id", id);
  json.end_object().end_object();
  out.push_back('\n');
}

}  // namespace cudaagent
