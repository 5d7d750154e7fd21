// Session: what a run needs from the world, passed explicitly (after LevelDB's Env):
// the program name for messages, a logger, a clock and the stop request set by signal handlers.
// Tests build their own Session with a fake clock or a capturing logger; nothing here is global.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

namespace cudaagent {

// Monotonic time in seconds. Virtual so tests can inject a slow or stepped clock.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now_seconds() const;
};

// Messages for people on stderr: "cudaagent-reward: cannot open 'x': reason". Not thread-safe
// across loggers sharing one FILE, but each call writes one whole line with one fwrite.
class Logger {
 public:
  Logger(std::string program, std::FILE* sink, bool quiet = false)
      : program_(std::move(program)), sink_(sink), quiet_(quiet) {}
  virtual ~Logger() = default;

  void error(std::string_view message) { write(message); }
  void warn(std::string_view message) { write(message); }
  // Informational lines are silenced by --quiet; errors and warnings never are.
  void info(std::string_view message) {
    if (!quiet_) write(message);
  }
  bool quiet() const { return quiet_; }
  void set_quiet(bool quiet) { quiet_ = quiet; }
  const std::string& program() const { return program_; }

 protected:
  virtual void write(std::string_view message);

 private:
  std::string program_;
  std::FILE* sink_;
  bool quiet_;
};

struct Session {
  Logger& log;
  const Clock& clock;
  // Set (from a signal handler) to the number of a signal that asked the run to stop; 0 otherwise.
  // Stages check it between records and stop after flushing what is complete.
  const std::atomic<int>& stop_signal;
};

// Quotes a subject for messages: 'runs.db'.
std::string quoted(std::string_view subject);

}  // namespace cudaagent
