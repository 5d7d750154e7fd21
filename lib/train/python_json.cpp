// Python-compatible JSON writing over a simdjson DOM, which keeps object keys in document order
// (as Python's dict does). Strings go through the project's JSON string escaper, whose escapes are
// the ones json.dumps uses with ensure_ascii=False (\" \\ \n \r \t \b \f, other controls \u00xx).
#include "cudaagent/train/python_json.h"

#include <simdjson.h>

#include <charconv>
#include <cmath>

#include "cudaagent/base/json_writer.h"

namespace cudaagent::train {
namespace {

Status append_value(std::string& out, simdjson::dom::element value) {
  using simdjson::dom::element_type;
  switch (value.type()) {
    case element_type::OBJECT: {
      out.push_back('{');
      bool first = true;
      simdjson::dom::object object;
      if (value.get(object) != simdjson::SUCCESS) return Status::error("bad JSON object");
      for (auto field : object) {
        if (!first) out.append(", ");
        first = false;
        append_json_string(out, field.key);
        out.append(": ");
        if (Status s = append_value(out, field.value); !s) return s;
      }
      out.push_back('}');
      return Status::ok();
    }
    case element_type::ARRAY: {
      out.push_back('[');
      bool first = true;
      simdjson::dom::array array;
      if (value.get(array) != simdjson::SUCCESS) return Status::error("bad JSON array");
      for (simdjson::dom::element item : array) {
        if (!first) out.append(", ");
        first = false;
        if (Status s = append_value(out, item); !s) return s;
      }
      out.push_back(']');
      return Status::ok();
    }
    case element_type::STRING:
      append_json_string(out, value.get_string().value_unsafe());
      return Status::ok();
    case element_type::INT64:
      out += std::to_string(value.get_int64().value_unsafe());
      return Status::ok();
    case element_type::UINT64:
      out += std::to_string(value.get_uint64().value_unsafe());
      return Status::ok();
    case element_type::DOUBLE:
      append_python_float(out, value.get_double().value_unsafe());
      return Status::ok();
    case element_type::BOOL:
      out += value.get_bool().value_unsafe() ? "true" : "false";
      return Status::ok();
    case element_type::NULL_VALUE:
      out += "null";
      return Status::ok();
  }
  return Status::error("unknown JSON value");
}

}  // namespace

void append_python_float(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "Infinity" : "-Infinity";
    return;
  }
  if (std::signbit(value)) out.push_back('-');
  value = std::fabs(value);
  if (value == 0) {
    out += "0.0";
    return;
  }
  // Shortest round-trip digits from to_chars' scientific form "d.ddde±XX".
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  const std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));
  const auto e = text.find('e');
  std::string digits;
  for (const char c : text.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  const std::string_view exp_text = text.substr(e + 1);
  std::from_chars(exp_text.data() + (exp_text[0] == '+' ? 1 : 0), exp_text.data() + exp_text.size(), exponent);
  const int point = exponent + 1;  // value = 0.<digits> * 10^point
  const int count = static_cast<int>(digits.size());
  if (point <= -4 || point > 16) {
    out.push_back(digits[0]);
    if (count > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    out.push_back('e');
    out.push_back(exponent < 0 ? '-' : '+');
    const int magnitude = exponent < 0 ? -exponent : exponent;
    if (magnitude < 10) out.push_back('0');
    out += std::to_string(magnitude);
  } else if (point <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-point), '0');
    out += digits;
  } else if (point < count) {
    out.append(digits, 0, static_cast<std::size_t>(point));
    out.push_back('.');
    out.append(digits, static_cast<std::size_t>(point));
  } else {
    out += digits;
    out.append(static_cast<std::size_t>(point - count), '0');
    out += ".0";
  }
}

Result<std::string> python_json_dumps(std::string_view json_text) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto error = parser.parse(json_text.data(), json_text.size()).get(root); error) {
    return Status::error(std::string("not JSON: ") + simdjson::error_message(error));
  }
  std::string out;
  if (Status s = append_value(out, root); !s) return s;
  return out;
}

}  // namespace cudaagent::train
