// Content hashing for ids and cache keys: lowercase hex SHA-256 (libcrypto does the hashing).
#pragma once

#include <string>
#include <string_view>

namespace cudaagent {

// Hex digest of the bytes. Thread-safe.
std::string sha256_hex(std::string_view bytes);

// Incremental form, for keys built from several parts without concatenating them. Each part is
// length-prefixed, so ("ab","c") and ("a","bc") hash differently.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& add(std::string_view bytes);       // raw bytes, no framing
  Sha256& add_part(std::string_view part);   // 8-byte little-endian length, then the bytes
  std::string hex_digest();                  // finishes the hash; the object is spent after this

 private:
  void* context_;  // EVP_MD_CTX*, kept opaque so users need no OpenSSL headers
};

}  // namespace cudaagent
