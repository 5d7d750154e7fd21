// Default clock and logger behind Session.
#include "cudaagent/base/session.h"

#include "cudaagent/base/terminal_text.h"

namespace cudaagent {

double Clock::now_seconds() const {
  using std::chrono::steady_clock;
  return std::chrono::duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Messages quote candidate bytes (file names, diagnostics, stderr lines): every line is escaped
// here, once for all callers, so none of it reaches a terminal raw. The cap is generous: callers
// cap what they quote themselves, and escaping twice changes nothing.
constexpr std::size_t kMessageBytes = std::size_t{64} << 10;

void Logger::write(std::string_view message) {
  const std::string text = printable_text(message, kMessageBytes);
  std::string line;
  line.reserve(program_.size() + text.size() + 3);
  line.append(program_).append(": ").append(text).push_back('\n');
  std::fwrite(line.data(), 1, line.size(), sink_);
  std::fflush(sink_);
}

std::string quoted(std::string_view subject) {
  return "'" + printable_text(subject, kQuotedBytes) + "'";
}

}  // namespace cudaagent
