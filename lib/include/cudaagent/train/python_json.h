// JSON text exactly as Python's `json.dumps(value, ensure_ascii=False)` writes it: ", " and ": "
// separators, keys in their original order, non-ASCII characters as they are, floats in Python's
// repr (1.0, 1e-05, 1e+16). Chat templates render tool definitions and tool-call arguments with
// it (`tojson`), and servers such as vLLM return parsed tool-call arguments in this form, so
// reproducing it byte for byte is what keeps our prompts identical to Hugging Face's.
#pragma once

#include <string>
#include <string_view>

#include "cudaagent/base/status.h"

namespace cudaagent::train {

// `json_text` (one JSON document) re-written in Python's form. A Status for text that is not
// JSON, or an integer beyond 64 bits (which simdjson does not read).
Result<std::string> python_json_dumps(std::string_view json_text);

// Python's repr of a double: the shortest digits that read back as `value`, in fixed notation
// with at least one decimal for decimal exponents -4 <= e < 16, else d.ddde+XX. Non-finite values
// become NaN, Infinity, -Infinity (what json.dumps writes).
void append_python_float(std::string& out, double value);

}  // namespace cudaagent::train
