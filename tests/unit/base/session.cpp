// The logger's status line on a terminal (a pseudo-terminal here): drawn in place, taken away
// before every message and drawn again after it, so a message never shares its line; hidden and
// shown around records; never drawn off a terminal.
#include "cudaagent/base/session.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace cudaagent {
namespace {

// Everything the terminal received so far, with the terminal's "\r\n" for "\n" undone.
std::string drain(int master) {
  std::string out;
  char buffer[4096];
  pollfd watch{master, POLLIN, 0};
  while (::poll(&watch, 1, 200) > 0) {
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n <= 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  std::string plain;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '\r' && i + 1 < out.size() && out[i + 1] == '\n') continue;
    plain.push_back(out[i]);
  }
  return plain;
}

TEST_CASE("on a terminal the status line never shares a line with a message (issue 16)") {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
    if (master >= 0) ::close(master);
    return;  // no pseudo-terminals here
  }
  const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  REQUIRE(slave >= 0);
  std::FILE* terminal = ::fdopen(slave, "w");
  REQUIRE(terminal != nullptr);
  {
    Logger log("cudaagent-test", terminal);
    REQUIRE(log.terminal());
    log.set_status("cudaagent-test: 3 of 10 records");
    log.info("'t1': kept");
    log.hide_status();  // records are written to the terminal here
    log.show_status();
    log.set_status("");
    CHECK(drain(master) ==
          "\r" "cudaagent-test: 3 of 10 records\x1b[K"  // drawn
          "\r\x1b[K" "cudaagent-test: 't1': kept\n"    // cleared, the message on a line of its own
          "\r" "cudaagent-test: 3 of 10 records\x1b[K"  // drawn again below it
          "\r\x1b[K"                                    // hidden for the records
          "\r" "cudaagent-test: 3 of 10 records\x1b[K"  // shown
          "\r\x1b[K");                                  // cleared at the end
  }
  std::fclose(terminal);
  ::close(master);
}

TEST_CASE("off a terminal there is no status line, only messages") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  {
    Logger log("cudaagent-test", file);
    CHECK_FALSE(log.terminal());
    log.set_status("3 of 10 records");
    log.info("hello");
    log.hide_status();
    log.show_status();
  }
  std::rewind(file);
  char text[256] = {};
  const std::size_t n = std::fread(text, 1, sizeof text - 1, file);
  CHECK(std::string(text, n) == "cudaagent-test: hello\n");
  std::fclose(file);
}

}  // namespace
}  // namespace cudaagent
