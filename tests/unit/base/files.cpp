// read_untrusted_file: what the trusted side reads from a directory an untrusted process wrote;
// temporary_sibling: the names atomic writes go through.
#include "cudaagent/base/files.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

using cudaagent::testing::TempDir;

TEST_CASE("read_untrusted_file reads regular files within the limit and nothing else") {
  TempDir dir;
  std::string bytes = "stale";
  cudaagent::testing::write_file(dir.file("ok.json"), "{\"a\":1}");
  REQUIRE(cudaagent::read_untrusted_file(dir.file("ok.json"), 100, bytes).is_ok());
  CHECK(bytes == "{\"a\":1}");

  cudaagent::testing::write_file(dir.file("big"), std::string(101, 'x'));
  auto status = cudaagent::read_untrusted_file(dir.file("big"), 100, bytes);
  CHECK_FALSE(status.is_ok());
  CHECK(status.message().find("101 bytes, more than the limit of 100") != std::string::npos);
  CHECK(bytes.empty());

  REQUIRE(::symlink(dir.file("ok.json").c_str(), dir.file("link").c_str()) == 0);
  status = cudaagent::read_untrusted_file(dir.file("link"), 100, bytes);
  CHECK(status.message().find("is a symbolic link") != std::string::npos);

  // A FIFO with no writer would block an ordinary open forever.
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  status = cudaagent::read_untrusted_file(dir.file("fifo"), 100, bytes);
  CHECK(status.message().find("not a regular file") != std::string::npos);

  status = cudaagent::read_untrusted_file(dir.file("missing"), 100, bytes);
  CHECK(status.message().find("No such file") != std::string::npos);
}

TEST_CASE("temporary_sibling never gives two writers of one path the same temporary") {
  const std::string first = cudaagent::temporary_sibling("/tmp/x/object.o");
  const std::string second = cudaagent::temporary_sibling("/tmp/x/object.o");
  CHECK(first != second);
  CHECK(first.starts_with("/tmp/x/object.o.tmp." + std::to_string(::getpid()) + "."));
  // From many threads at once: every name distinct.
  std::vector<std::string> names(400);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&names, t] {
      for (int i = t; i < 400; i += 4) names[static_cast<std::size_t>(i)] = cudaagent::temporary_sibling("p");
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
}
