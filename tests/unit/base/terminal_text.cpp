// printable_text (issue 10, class 9): escape sequences, controls, invalid UTF-8 and invisible
// characters made visible; printable UTF-8 kept; idempotent; capped between characters.
#include "cudaagent/base/terminal_text.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "cudaagent/base/session.h"

using cudaagent::printable_text;

TEST_CASE("printable text is kept, UTF-8 letters included") {
  CHECK(printable_text("cannot open 'ws/model_new.py': No such file") ==
        "cannot open 'ws/model_new.py': No such file");
  CHECK(printable_text("noyau_é_核_🚀 C:\\path") == "noyau_é_核_🚀 C:\\path");
  CHECK(printable_text("") == "");
}

TEST_CASE("controls, escape sequences and DEL become visible") {
  CHECK(printable_text("a\nb\rc\td") == "a\\nb\\rc\\td");
  CHECK(printable_text("\x1b[2J\x1b]8;;http://x\x07") == "\\e[2J\\e]8;;http://x\\x07");
  CHECK(printable_text(std::string("nul\0x", 5)) == "nul\\x00x");
  CHECK(printable_text("\x7f") == "\\x7f");
  // A forged line: a newline and a carriage return can no longer start a new terminal line.
  CHECK(printable_text("ok\ncudaagent-verify: 'ws': PASS").find('\n') == std::string::npos);
}

TEST_CASE("invalid UTF-8 becomes \\xNN, byte by byte") {
  CHECK(printable_text("\xff\xfe") == "\\xff\\xfe");
  CHECK(printable_text("\xc3") == "\\xc3");                  // truncated
  CHECK(printable_text("\xc0\xaf") == "\\xc0\\xaf");          // overlong '/'
  CHECK(printable_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(printable_text("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  CHECK(printable_text("\x80z") == "\\x80z");                // a stray continuation byte
}

TEST_CASE("C1 controls, bidirectional overrides and zero-width characters become \\u{...}") {
  CHECK(printable_text("\xc2\x9b" "31m") == "\\u{009B}31m");  // CSI as one C1 character
  CHECK(printable_text("a\xe2\x80\xae" "cba") == "a\\u{202E}cba");  // right-to-left override
  CHECK(printable_text("\xe2\x81\xa6x\xe2\x81\xa9") == "\\u{2066}x\\u{2069}");
  CHECK(printable_text("a\xe2\x80\x8b" "b\xef\xbb\xbf") == "a\\u{200B}b\\u{FEFF}");
  CHECK(printable_text("\xe2\x80\xa8") == "\\u{2028}");
}

TEST_CASE("escaping is idempotent") {
  const std::string samples[] = {"a\nb", "\x1b[31mred", "\xff", "\xe2\x80\xae", "plain \\x41 text",
                                 std::string("\0\x01\x02", 3)};
  for (const std::string& sample : samples) {
    CAPTURE(sample);
    const std::string once = printable_text(sample);
    CHECK(printable_text(once) == once);
  }
}

TEST_CASE("the cap cuts between characters and says how much is left") {
  CHECK(printable_text("abcdef", 4) == "abcd... (2 more bytes)");
  CHECK(printable_text("ab\ncd", 3) == "ab... (3 more bytes)");  // "\n" would not fit whole
  CHECK(printable_text("a\xc3\xa9z", 2) == "a... (3 more bytes)");  // é is not split
  CHECK(printable_text("abc", 3) == "abc");
  CHECK(printable_text(std::string(100000, 'x')).size() <= cudaagent::kPrintableTextBytes + 32);
}

TEST_CASE("quoted() and the logger never let raw controls through") {
  CHECK(cudaagent::quoted("ws\x1b[2J") == "'ws\\e[2J'");
  CHECK(cudaagent::quoted(std::string(5000, 'a')).size() < 1100);
  std::FILE* sink = std::tmpfile();
  REQUIRE(sink != nullptr);
  cudaagent::Logger log("cudaagent-test", sink);
  log.error("candidate said: \x1b]0;owned\x07\nPASS");
  std::rewind(sink);
  char buffer[256] = {};
  const std::size_t got = std::fread(buffer, 1, sizeof buffer - 1, sink);
  std::fclose(sink);
  CHECK(std::string(buffer, got) == "cudaagent-test: candidate said: \\e]0;owned\\x07\\nPASS\n");
}
