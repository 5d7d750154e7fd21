// Default clock and logger behind Session.
#include "cudaagent/base/session.h"

namespace cudaagent {

double Clock::now_seconds() const {
  using std::chrono::steady_clock;
  return std::chrono::duration<double>(steady_clock::now().time_since_epoch()).count();
}

void Logger::write(std::string_view message) {
  std::string line;
  line.reserve(program_.size() + message.size() + 3);
  line.append(program_).append(": ").append(message).push_back('\n');
  std::fwrite(line.data(), 1, line.size(), sink_);
  std::fflush(sink_);
}

std::string quoted(std::string_view subject) {
  std::string out;
  out.reserve(subject.size() + 2);
  out.push_back('\'');
  out.append(subject);
  out.push_back('\'');
  return out;
}

}  // namespace cudaagent
