#include "cudaagent/records/cli.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

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

TEST_CASE("shard once: in an array task only the stage that starts a pipeline shards (issue 16)") {
  using cudaagent::choose_shard;
  using cudaagent::InputKind;
  // Task 2 of an array of 4 (--array=0-3).
  for (InputKind first : {InputKind::kMadeHere, InputKind::kFiles, InputKind::kStdinFile}) {
    auto choice = choose_shard("", first, "2", "0", "4");
    REQUIRE(choice.is_ok());
    CHECK(choice.value().shard.index == 2);
    CHECK(choice.value().shard.count == 4);
    CHECK(choice.value().note == "shard 2/4 (from SLURM_ARRAY_TASK_ID)");
  }
  // A stage fed by a pipe takes everything: its producer already took the task's share.
  auto fed = choose_shard("", InputKind::kStdinStream, "2", "0", "4");
  REQUIRE(fed.is_ok());
  CHECK(fed.value().shard.count == 1);
  CHECK(fed.value().note.find("input is a stream") == 0);
  // --shard wins both ways; 0/1 is the explicit "do not shard" marker.
  auto forced = choose_shard("1/3", InputKind::kStdinStream, "2", "0", "4");
  REQUIRE(forced.is_ok());
  CHECK(forced.value().shard.index == 1);
  CHECK(forced.value().shard.count == 3);
  auto none = choose_shard("0/1", InputKind::kFiles, "2", "0", "4");
  REQUIRE(none.is_ok());
  CHECK(none.value().shard.count == 1);
  CHECK(none.value().note.empty());
  // Outside an array nothing shards, whatever the input.
  auto plain = choose_shard("", InputKind::kFiles, nullptr, nullptr, nullptr);
  REQUIRE(plain.is_ok());
  CHECK(plain.value().shard.count == 1);
  CHECK(plain.value().note.empty());
  CHECK_FALSE(choose_shard("4/4", InputKind::kFiles, nullptr, nullptr, nullptr).is_ok());
  CHECK_FALSE(choose_shard("", InputKind::kFiles, "7", "0", "4").is_ok());
}

TEST_CASE("input_kind: named inputs are files; stdin is a file or a stream by what it is") {
  using cudaagent::input_kind;
  using cudaagent::InputKind;
  CHECK(input_kind({}, true) == InputKind::kMadeHere);
  CHECK(input_kind({"a.jsonl"}, false) == InputKind::kFiles);
  CHECK(input_kind({"-", "a.jsonl"}, false) == InputKind::kFiles);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  CHECK(input_kind({}, false, fds[0]) == InputKind::kStdinStream);
  CHECK(input_kind({"-"}, false, fds[0]) == InputKind::kStdinStream);
  ::close(fds[0]);
  ::close(fds[1]);
  const int file = ::open("/etc/hostname", O_RDONLY);
  if (file >= 0) {
    CHECK(input_kind({}, false, file) == InputKind::kStdinFile);
    ::close(file);
  }
}
