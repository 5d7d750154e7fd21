// The filter tool's own flag values: the time window and sizes.
#include "cudaagent/filter/stage.h"

#include <doctest/doctest.h>

TEST_CASE("parse_window takes LOW,HIGH") {
  auto window = cudaagent::parse_window("1,100");
  REQUIRE(window.is_ok());
  CHECK(window.value() == std::pair{1.0, 100.0});
  CHECK(cudaagent::parse_window("0.01,1000").value() == std::pair{0.01, 1000.0});
  CHECK(cudaagent::parse_window("5,5").is_ok());
  for (const char* bad : {"", "1", "1,", ",1", "100,1", "-1,5", "1;100", "1,100,3", "a,b", "1, 100",
                          "nan,1", "1,inf"}) {
    CAPTURE(bad);
    CHECK_FALSE(cudaagent::parse_window(bad).is_ok());
  }
}

TEST_CASE("parse_size takes bytes with K, M, G or T") {
  CHECK(cudaagent::parse_size("0").value() == 0);
  CHECK(cudaagent::parse_size("1024").value() == 1024);
  CHECK(cudaagent::parse_size("4K").value() == 4096);
  CHECK(cudaagent::parse_size("512M").value() == 512ull << 20);
  CHECK(cudaagent::parse_size("16G").value() == 16ull << 30);
  CHECK(cudaagent::parse_size("2T").value() == 2ull << 40);
  for (const char* bad : {"", "G", "16g", "1.5G", "-1", "16GB", "99999999999T"}) {
    CAPTURE(bad);
    CHECK_FALSE(cudaagent::parse_size(bad).is_ok());
  }
}
