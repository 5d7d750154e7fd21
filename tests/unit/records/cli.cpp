#include "cudaagent/records/cli.h"

#include <doctest/doctest.h>

using cudaagent::parse_shard;
using cudaagent::shard_from_slurm;

TEST_CASE("parse_shard accepts I/N with I < N and rejects the rest") {
  auto shard = parse_shard("2/5");
  REQUIRE(shard.is_ok());
  CHECK(shard.value().index == 2);
  CHECK(shard.value().count == 5);
  for (const char* bad : {"5/5", "1/0", "x/2", "1", "/2", "1/", "-1/2", "1/2/3", " 1/2"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_shard(bad).is_ok());
  }
}

TEST_CASE("ShardSpec partitions ordinals exactly") {
  const std::uint64_t count = 3;
  for (std::uint64_t ordinal = 0; ordinal < 30; ++ordinal) {
    int owners = 0;
    for (std::uint64_t index = 0; index < count; ++index) {
      owners += cudaagent::ShardSpec{index, count}.owns(ordinal) ? 1 : 0;
    }
    CHECK(owners == 1);
  }
}

TEST_CASE("shard_from_slurm reads array task variables, offset by the array's minimum") {
  CHECK(shard_from_slurm(nullptr, nullptr, nullptr).value().count == 1);
  auto zero_based = shard_from_slurm("3", nullptr, "4");
  REQUIRE(zero_based.is_ok());
  CHECK(zero_based.value().index == 3);
  auto one_based = shard_from_slurm("4", "1", "4");  // --array=1-4
  REQUIRE(one_based.is_ok());
  CHECK(one_based.value().index == 3);
  CHECK(one_based.value().count == 4);
  CHECK_FALSE(shard_from_slurm("4", nullptr, "4").is_ok());
  CHECK_FALSE(shard_from_slurm("0", "1", "4").is_ok());
  CHECK_FALSE(shard_from_slurm("a", nullptr, "4").is_ok());
}
