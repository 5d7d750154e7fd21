// SHA-256 through OpenSSL's EVP interface (libcrypto), never a hand-written digest.
#include "cudaagent/base/sha256.h"

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <stdexcept>

namespace cudaagent {
namespace {

EVP_MD_CTX* as_ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }

std::string to_hex(const unsigned char* bytes, unsigned length) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(length * 2, '0');
  for (unsigned i = 0; i < length; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

}  // namespace

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  // Allocation failure of a few hundred bytes is not a recoverable condition here.
  if (context_ == nullptr || EVP_DigestInit_ex(as_ctx(context_), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("libcrypto: cannot initialise SHA-256");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(as_ctx(context_)); }

Sha256& Sha256::add(std::string_view bytes) {
  EVP_DigestUpdate(as_ctx(context_), bytes.data(), bytes.size());
  return *this;
}

Sha256& Sha256::add_part(std::string_view part) {
  std::array<unsigned char, 8> length{};
  auto n = static_cast<std::uint64_t>(part.size());
  for (auto& byte : length) {
    byte = static_cast<unsigned char>(n & 0xff);
    n >>= 8;
  }
  EVP_DigestUpdate(as_ctx(context_), length.data(), length.size());
  return add(part);
}

std::string Sha256::hex_digest() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned length = 0;
  EVP_DigestFinal_ex(as_ctx(context_), digest.data(), &length);
  return to_hex(digest.data(), length);
}

std::string sha256_hex(std::string_view bytes) { return Sha256().add(bytes).hex_digest(); }

}  // namespace cudaagent
