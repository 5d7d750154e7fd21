// Subprocess's ending and kept stderr against /bin/sh: the exit code of a child that is ending by
// itself, SIGKILL for one that is not, and the end of its stderr after it is gone. (The line
// exchange is tested with HarnessWorker in harness_worker.cpp.)
#include "cudaagent/sandbox/subprocess.h"

#include <doctest/doctest.h>

#include <csignal>
#include <string>

namespace cudaagent {
namespace {

ProcessSpec shell(const std::string& script) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C.UTF-8"};
  return spec;
}

TEST_CASE("finish reports the code of a child that exits by itself, within the grace") {
  // It closes its stdout first, as a dying helper does, then takes a moment to exit.
  auto spawned = Subprocess::spawn_keeping_stderr(
      shell("echo ready; exec 1>&-; echo 'first line' >&2; echo 'going away' >&2; sleep 0.2; exit 3"));
  REQUIRE(spawned);
  Subprocess& child = spawned.value();
  auto line = child.receive_line(5, 100);
  REQUIRE(line);
  CHECK(line.value().text == "ready");
  line = child.receive_line(5, 100);
  REQUIRE(line);
  CHECK(line.value().kind == Subprocess::Line::Kind::kClosed);
  const auto ended = child.finish(5);
  REQUIRE(ended.has_value());
  CHECK(ended->outcome == ProcessResult::Outcome::kExited);
  CHECK(ended->exit_code == 3);
  CHECK_FALSE(child.running());
  CHECK(child.stderr_tail(4096) == "first line\ngoing away\n");
  CHECK(child.stderr_tail(11) == "going away\n");
  CHECK_FALSE(child.finish(1).has_value());  // nothing left to finish
}

TEST_CASE("finish kills a child that does not exit within the grace") {
  auto spawned = Subprocess::spawn_keeping_stderr(shell("echo stuck >&2; echo ready; exec sleep 30"));
  REQUIRE(spawned);
  auto line = spawned.value().receive_line(5, 100);
  REQUIRE(line);
  CHECK(line.value().text == "ready");
  const auto ended = spawned.value().finish(0.2);
  REQUIRE(ended.has_value());
  CHECK(ended->outcome == ProcessResult::Outcome::kSignaled);
  CHECK(ended->signal == SIGKILL);
  CHECK(spawned.value().stderr_tail(100) == "stuck\n");
}

TEST_CASE("stderr is kept only when asked, and a moved Subprocess keeps it") {
  auto discarded = Subprocess::spawn(shell("echo lost >&2"), "");
  REQUIRE(discarded);
  CHECK(discarded.value().finish(5).has_value());
  CHECK(discarded.value().stderr_tail(100).empty());

  auto kept = Subprocess::spawn_keeping_stderr(shell("echo kept >&2"));
  REQUIRE(kept);
  Subprocess moved = std::move(kept).value();
  REQUIRE(moved.finish(5).has_value());
  CHECK(moved.stderr_tail(100) == "kept\n");
}

}  // namespace
}  // namespace cudaagent
