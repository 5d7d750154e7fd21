// Session: what a run needs from the world, passed explicitly (after LevelDB's Env):
// the program name for messages, a logger, a clock and the stop request set by signal handlers.
// Tests build their own Session with a fake clock or a capturing logger; nothing here is global.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace cudaagent {

// Monotonic time in seconds. Virtual so tests can inject a slow or stepped clock.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now_seconds() const;
};

// Messages for people on stderr: "cudaagent-reward: cannot open 'x': reason". Each message is
// written through printable_text (terminal_text.h): control characters, invalid UTF-8 and
// invisible characters become visible escapes, so a message is always one line, whatever
// candidate bytes it quotes. Thread-safe: each message is one whole line written under a lock
// (several loggers sharing one FILE still write whole lines, each with one fwrite).
// The status line: when the sink is a terminal, set_status() keeps one self-overwriting line at
// the bottom ("\r...\x1b[K", the progress of a run); every message clears it, is written, and
// draws it again below, so messages and the status never share a line. Off a terminal the status
// is not drawn at all (batch logs get Progress's periodic lines instead).
class Logger {
 public:
  Logger(std::string program, std::FILE* sink, bool quiet = false);
  virtual ~Logger() = default;
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  void error(std::string_view message) { emit(message); }
  void warn(std::string_view message) { emit(message); }
  // Informational lines are silenced by --quiet; errors and warnings never are.
  void info(std::string_view message) {
    if (!quiet_) emit(message);
  }
  bool quiet() const { return quiet_; }
  void set_quiet(bool quiet) { quiet_ = quiet; }
  const std::string& program() const { return program_; }

  // Whether the sink is a terminal (where a status line is drawn).
  bool terminal() const { return terminal_; }
  // Sets (and draws, on a terminal) the status line; "" clears it.
  void set_status(std::string_view line);
  // Takes the status line off the terminal, keeping its text, before something else is written
  // to the same terminal (records on stdout); show_status() draws it again.
  void hide_status();
  void show_status();

 protected:
  // Writes one message line. Called under the logger's lock with the status line cleared.
  virtual void write(std::string_view message);

 private:
  void emit(std::string_view message);
  void draw_status_locked();
  void clear_status_locked();

  std::string program_;
  std::FILE* sink_;
  bool quiet_;
  bool terminal_ = false;
  std::mutex mutex_;
  std::string status_;
  bool status_drawn_ = false;
};

struct Session {
  Logger& log;
  const Clock& clock;
  // The number of a signal that asked the run to stop; 0 otherwise. Set by the signal handler
  // (SIGINT, SIGTERM, SIGHUP), and by the record driver (to SIGPIPE) when the reader downstream
  // went away. Stages look at it between records; the lower layers take its address to end a
  // wait early (ProcessSpec::stop, HarnessWorkerOptions::stop, DeviceLock::acquire), so that a
  // stop ends running jobs within a fraction of a second.
  std::atomic<int>& stop_signal;
};

// Quotes a subject for messages: 'runs.db'. The subject goes through printable_text
// (terminal_text.h), capped at kQuotedBytes, so a name made of escape sequences prints as text.
inline constexpr std::size_t kQuotedBytes = 1024;
std::string quoted(std::string_view subject);
// Exact overloads: for a std::string or a C string, argument-dependent lookup also finds
// std::quoted wherever a standard header has declared it (GCC 13's do, without <iomanip>), and
// that template matches exactly, so it would win over the conversion to string_view.
inline std::string quoted(const std::string& subject) { return quoted(std::string_view(subject)); }
inline std::string quoted(const char* subject) { return quoted(std::string_view(subject)); }

}  // namespace cudaagent
