#include "cudaagent/records/line_reader.h"

#include <doctest/doctest.h>

#include <vector>

#include "test_support.h"

using cudaagent::InputLine;
using cudaagent::LineReader;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;

namespace {

struct Line {
  std::string bytes;
  bool terminated;
  bool oversized;
  std::uint64_t full_size;
};

std::vector<Line> read_all(const std::string& path, std::size_t cap = 1 << 20) {
  auto reader = LineReader::open(path, cap);
  REQUIRE(reader.is_ok());
  std::vector<Line> lines;
  InputLine line;
  for (;;) {
    auto more = reader.value().next(line);
    REQUIRE(more.is_ok());
    if (!more.value()) break;
    // simdjson reads up to kLinePadding bytes past the end: they must be addressable (ASan).
    volatile char past = line.bytes.data()[line.bytes.size() + cudaagent::kLinePadding - 1];
    (void)past;
    lines.push_back({std::string(line.bytes), line.terminated, line.oversized, line.full_size});
  }
  return lines;
}

}  // namespace

TEST_CASE("LineReader splits lines, strips CR and a leading BOM, flags an unterminated tail") {
  TempDir dir;
  write_file(dir.file("in"), "\xEF\xBB\xBF{\"a\":1}\r\n\n{\"b\":2}\n{\"c\":");
  const auto lines = read_all(dir.file("in"));
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].bytes == "{\"a\":1}");
  CHECK(lines[1].bytes.empty());
  CHECK(lines[2].bytes == "{\"b\":2}");
  CHECK(lines[3].bytes == "{\"c\":");
  CHECK(lines[2].terminated);
  CHECK_FALSE(lines[3].terminated);
}

TEST_CASE("LineReader handles an empty input and a BOM-only input") {
  TempDir dir;
  write_file(dir.file("empty"), "");
  write_file(dir.file("bom"), "\xEF\xBB\xBF");
  CHECK(read_all(dir.file("empty")).empty());
  CHECK(read_all(dir.file("bom")).empty());
}

TEST_CASE("LineReader reads lines much longer than one read chunk") {
  TempDir dir;
  const std::string big(5'000'000, 'x');
  write_file(dir.file("in"), "short\n" + big + "\nafter\n");
  const auto lines = read_all(dir.file("in"), 64 << 20);
  REQUIRE(lines.size() == 3);
  CHECK(lines[1].bytes == big);
  CHECK(lines[2].bytes == "after");
}

TEST_CASE("LineReader reports lines over the cap as oversized and keeps going") {
  TempDir dir;
  const std::string big(3'000'000, 'y');
  write_file(dir.file("in"), "{}\n" + std::string(300, 'z') + "\n" + big + "\n{\"ok\":1}\n" + big);
  const auto lines = read_all(dir.file("in"), 100);
  REQUIRE(lines.size() == 5);
  CHECK_FALSE(lines[0].oversized);
  CHECK(lines[1].oversized);  // over the cap though its newline was already buffered
  CHECK(lines[1].full_size == 300);
  CHECK(lines[2].oversized);  // over the cap and longer than the buffer: skipped while streaming
  CHECK(lines[2].full_size == big.size());
  CHECK(lines[2].bytes == std::string(100, 'y'));  // only a prefix is kept
  CHECK(lines[3].bytes == "{\"ok\":1}");
  CHECK(lines[4].oversized);
  CHECK_FALSE(lines[4].terminated);
}

TEST_CASE("LineReader numbers lines and knows the input size") {
  TempDir dir;
  write_file(dir.file("in"), "a\nb\nc\n");
  auto reader = LineReader::open(dir.file("in"), 1024);
  REQUIRE(reader.is_ok());
  CHECK(reader.value().size().value() == 6);
  InputLine line;
  std::uint64_t last = 0;
  while (reader.value().next(line).value()) last = line.number;
  CHECK(last == 3);
  CHECK(reader.value().bytes_consumed() == 6);
}

TEST_CASE("LineReader::open reports missing files and directories") {
  TempDir dir;
  auto missing = LineReader::open(dir.file("nope"), 1024);
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message().find("cannot open") != std::string::npos);
  auto directory = LineReader::open(dir.path().string(), 1024);
  REQUIRE_FALSE(directory.is_ok());
  CHECK(directory.status().message().find("is a directory") != std::string::npos);
}
