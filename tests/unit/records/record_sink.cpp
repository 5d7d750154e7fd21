// RecordSink's ends: a completed run renames into place; a stopped or failed one keeps what it
// wrote as FILE.partial and never under FILE; a pipe whose reader went away is noticed without a
// write.
#include "cudaagent/records/record_sink.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "test_support.h"

namespace cudaagent {
namespace {

using testing::TempDir;

TEST_CASE("a run that did not complete keeps its records as FILE.partial, never as FILE (issue 16)") {
  TempDir dir;
  const std::string out = dir.file("out.jsonl");
  {
    auto sink = RecordSink::open(out);
    REQUIRE(sink);
    REQUIRE(sink.value().write("{\"id\":\"a\"}\n"));
    auto kept = sink.value().keep_partial();
    REQUIRE(kept);
    CHECK(kept.value() == out + ".partial");
  }
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK(testing::read_file(out + ".partial") == "{\"id\":\"a\"}\n");
  // Nothing written: nothing kept, no temporary file left.
  {
    auto sink = RecordSink::open(dir.file("empty.jsonl"));
    REQUIRE(sink);
    auto kept = sink.value().keep_partial();
    REQUIRE(kept);
    CHECK(kept.value().empty());
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);
  }
}

TEST_CASE("finish_sink commits a completed run and keeps a stopped one partial") {
  TempDir dir;
  Logger log("test", stderr, true);
  Clock clock;
  std::atomic<int> stop{0};
  Session session{log, clock, stop};
  {
    auto sink = RecordSink::open(dir.file("done.jsonl"));
    REQUIRE(sink);
    REQUIRE(sink.value().write("{}\n"));
    auto end = finish_sink(sink.value(), session);
    REQUIRE(end);
    CHECK(end.value() == StageEnd::kCompleted);
  }
  CHECK(testing::read_file(dir.file("done.jsonl")) == "{}\n");
  stop = SIGTERM;
  {
    auto sink = RecordSink::open(dir.file("stopped.jsonl"));
    REQUIRE(sink);
    REQUIRE(sink.value().write("{}\n"));
    REQUIRE(finish_sink(sink.value(), session));
  }
  CHECK_FALSE(std::filesystem::exists(dir.file("stopped.jsonl")));
  CHECK(testing::read_file(dir.file("stopped.jsonl.partial")) == "{}\n");
}

TEST_CASE("a pipe whose reader went away is noticed without writing to it") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  TempDir dir;
  const std::string path = "/proc/self/fd/" + std::to_string(fds[1]);
  auto sink = RecordSink::open(path);  // a FIFO: written in place
  REQUIRE(sink);
  CHECK(sink.value().interactive());
  CHECK_FALSE(sink.value().reader_gone());
  ::close(fds[0]);
  CHECK(sink.value().reader_gone());
  CHECK(sink.value().pipe_closed());
  ::close(fds[1]);
}

}  // namespace
}  // namespace cudaagent
