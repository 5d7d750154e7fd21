// Default clock and logger behind Session.
#include "cudaagent/base/session.h"

#include <unistd.h>

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

Logger::Logger(std::string program, std::FILE* sink, bool quiet)
    : program_(std::move(program)), sink_(sink), quiet_(quiet) {
  const int fd = sink_ != nullptr ? ::fileno(sink_) : -1;
  terminal_ = fd >= 0 && ::isatty(fd) == 1;
}

void Logger::write(std::string_view message) {
  const std::string text = printable_text(message, kMessageBytes);
  std::string line;
  line.reserve(program_.size() + text.size() + 3);
  line.append(program_).append(": ").append(text).push_back('\n');
  std::fwrite(line.data(), 1, line.size(), sink_);
  std::fflush(sink_);
}

void Logger::emit(std::string_view message) {
  std::lock_guard lock(mutex_);
  clear_status_locked();
  write(message);
  draw_status_locked();
}

void Logger::set_status(std::string_view line) {
  std::lock_guard lock(mutex_);
  status_ = printable_text(line, kMessageBytes);  // it may name a task or a workspace
  if (status_.empty()) {
    clear_status_locked();
  } else {
    draw_status_locked();
  }
}

void Logger::hide_status() {
  std::lock_guard lock(mutex_);
  clear_status_locked();
}

void Logger::show_status() {
  std::lock_guard lock(mutex_);
  draw_status_locked();
}

void Logger::draw_status_locked() {
  if (!terminal_ || status_.empty()) return;
  const std::string text = "\r" + status_ + "\x1b[K";
  std::fwrite(text.data(), 1, text.size(), sink_);
  std::fflush(sink_);
  status_drawn_ = true;
}

void Logger::clear_status_locked() {
  if (!status_drawn_) return;
  std::fputs("\r\x1b[K", sink_);
  std::fflush(sink_);
  status_drawn_ = false;
}

std::string quoted(std::string_view subject) {
  return "'" + printable_text(subject, kQuotedBytes) + "'";
}

}  // namespace cudaagent
