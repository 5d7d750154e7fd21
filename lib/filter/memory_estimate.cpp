// task_memory_estimate: tensor sizes from the shapes synth recorded, with every product checked
// so that a malformed or hostile record yields 0 (unknown), never an overflow.
#include "cudaagent/filter/memory_estimate.h"

#include <optional>
#include <string_view>

namespace cudaagent {

namespace {

// Anything larger is not a task a GPU could hold: the record is not to be believed.
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 50;

std::optional<std::uint64_t> element_size(std::string_view dtype) {
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16") return 2;
  if (dtype == "float64" || dtype == "int64") return 8;
  if (dtype == "int8" || dtype == "uint8" || dtype == "bool") return 1;
  return std::nullopt;
}

// The bytes of a tensor of `shape` (an array of non-negative integers).
std::optional<std::uint64_t> tensor_bytes(simdjson::dom::element shape, std::uint64_t size) {
  simdjson::dom::array dims;
  if (shape.get_array().get(dims)) return std::nullopt;
  std::uint64_t bytes = size;
  for (auto dim : dims) {
    std::int64_t n = 0;
    if (dim.get_int64().get(n) || n < 0) return std::nullopt;
    if (n != 0 && bytes > kMaxBytes / static_cast<std::uint64_t>(n)) return std::nullopt;
    bytes *= static_cast<std::uint64_t>(n);
  }
  return bytes;
}

}  // namespace

TaskMemory task_memory_estimate(simdjson::dom::element task) {
  simdjson::dom::object meta;
  if (task["meta"].get_object().get(meta)) return {};
  std::string_view dtype;
  simdjson::dom::array inputs;
  simdjson::dom::element output;
  std::int64_t traffic = 0;
  if (meta["dtype"].get_string().get(dtype) || meta["input_shapes"].get_array().get(inputs) ||
      meta["output_shape"].get(output) || meta["bytes"].get_int64().get(traffic) || traffic < 0 ||
      static_cast<std::uint64_t>(traffic) > kMaxBytes) {
    return {};
  }
  const auto size = element_size(dtype);
  if (!size) return {};
  std::uint64_t input_bytes = 0;
  for (auto shape : inputs) {
    const auto bytes = tensor_bytes(shape, *size);
    if (!bytes) return {};
    input_bytes += *bytes;
    if (input_bytes > kMaxBytes) return {};
  }
  const auto output_bytes = tensor_bytes(output, *size);
  if (!output_bytes) return {};
  return {2 * input_bytes + 2 * *output_bytes + static_cast<std::uint64_t>(traffic) / 2,
          input_bytes + *output_bytes};
}

}  // namespace cudaagent
