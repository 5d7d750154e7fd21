// Compact text for number-dense arrays in JSONL records (token ids, log-probabilities): the
// values as little-endian 32-bit words, base64-encoded (RFC 4648, with padding). About 5.3
// characters per value instead of 6-7 for decimal ids and ~20 for decimal floats, and a reader
// decodes a string instead of parsing numbers one by one. Float32 is exact for the log-probs
// servers return (they compute them in float32). Thread-safe pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cudaagent::llm {

std::string encode_u32_base64(const std::vector<std::int32_t>& values);
std::string encode_f32_base64(const std::vector<float>& values);
std::string encode_u8_base64(const std::vector<std::uint8_t>& values);

// nullopt when `text` is not base64 of a whole number of words.
std::optional<std::vector<std::int32_t>> decode_u32_base64(std::string_view text);
std::optional<std::vector<float>> decode_f32_base64(std::string_view text);

}  // namespace cudaagent::llm
