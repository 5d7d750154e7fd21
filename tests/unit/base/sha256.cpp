#include "cudaagent/base/sha256.h"

#include <doctest/doctest.h>

using cudaagent::Sha256;
using cudaagent::sha256_hex;

TEST_CASE("sha256_hex matches the FIPS 180-2 test vectors") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("Sha256 streams the same digest as one call") {
  CHECK(Sha256().add("a").add("bc").hex_digest() == sha256_hex("abc"));
}

TEST_CASE("Sha256::add_part frames parts so that boundaries matter") {
  const auto ab_c = Sha256().add_part("ab").add_part("c").hex_digest();
  const auto a_bc = Sha256().add_part("a").add_part("bc").hex_digest();
  CHECK(ab_c != a_bc);
  CHECK(ab_c.size() == 64);
}
