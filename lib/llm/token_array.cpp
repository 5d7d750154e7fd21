// Base64 through libcrypto's EVP block coder; the byte order is fixed to little-endian here, not
// taken from the host, so records read the same everywhere.
#include "cudaagent/llm/token_array.h"

#include <openssl/evp.h>

#include <cstring>

namespace cudaagent::llm {
namespace {

std::string encode_bytes(const unsigned char* data, std::size_t size) {
  if (size == 0) return {};
  std::string out(4 * ((size + 2) / 3) + 1, '\0');
  const int written =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(size));
  out.resize(static_cast<std::size_t>(written));
  return out;
}

std::optional<std::string> decode_bytes(std::string_view text) {
  if (text.empty()) return std::string();
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  const int written =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (written < 0) return std::nullopt;
  // EVP_DecodeBlock counts padding as zero bytes: drop one per '='.
  std::size_t size = static_cast<std::size_t>(written);
  for (std::size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) --size;
  out.resize(size);
  return out;
}

void put_u32(std::uint32_t value, unsigned char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

std::uint32_t get_u32(const char* in) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= std::uint32_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

}  // namespace

std::string encode_u32_base64(const std::vector<std::int32_t>& values) {
  std::vector<unsigned char> bytes(values.size() * 4);
  for (std::size_t i = 0; i < values.size(); ++i)
    put_u32(static_cast<std::uint32_t>(values[i]), &bytes[4 * i]);
  return encode_bytes(bytes.data(), bytes.size());
}

std::string encode_f32_base64(const std::vector<float>& values) {
  std::vector<unsigned char> bytes(values.size() * 4);
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t word = 0;
    std::memcpy(&word, &values[i], 4);
    put_u32(word, &bytes[4 * i]);
  }
  return encode_bytes(bytes.data(), bytes.size());
}

std::string encode_u8_base64(const std::vector<std::uint8_t>& values) {
  return encode_bytes(values.data(), values.size());
}

std::optional<std::vector<std::int32_t>> decode_u32_base64(std::string_view text) {
  auto bytes = decode_bytes(text);
  if (!bytes || bytes->size() % 4 != 0) return std::nullopt;
  std::vector<std::int32_t> values(bytes->size() / 4);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<std::int32_t>(get_u32(&(*bytes)[4 * i]));
  return values;
}

std::optional<std::vector<float>> decode_f32_base64(std::string_view text) {
  auto bytes = decode_bytes(text);
  if (!bytes || bytes->size() % 4 != 0) return std::nullopt;
  std::vector<float> values(bytes->size() / 4);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint32_t word = get_u32(&(*bytes)[4 * i]);
    std::memcpy(&values[i], &word, 4);
  }
  return values;
}

}  // namespace cudaagent::llm
