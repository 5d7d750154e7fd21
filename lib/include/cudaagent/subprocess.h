// A long-lived child process spoken to line by line over its stdin and stdout: how the verifier
// keeps a harness worker that has imported torch once. Spawned with the same rules as run_process
// (argv without a shell, the exact environment, rlimits, run_as, inherit_fds, its own process
// group); the deadlines are per exchange instead of per process. The destructor kills the whole
// group and reaps it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "cudaagent/process.h"
#include "cudaagent/status.h"

namespace cudaagent {

namespace process_detail {
class ChildProcess;
}

class Subprocess {
 public:
  // What receive_line found.
  struct Line {
    enum class Kind {
      kLine,     // `text` holds one line, without its '\n'
      kTimeout,  // nothing complete within the time given; the process is still running
      kClosed,   // the process closed its stdout (it exited, or is about to)
      kTooLong,  // a line longer than the limit: the stream can no longer be trusted
    };
    Kind kind = Kind::kClosed;
    std::string text;
  };

  // Starts spec.argv. spec.stdin_data, the output caps and timeout_seconds are not used. The
  // child's stderr is appended to `stderr_path` (created 0600), or discarded when it is empty. A
  // program that cannot be started is a failed Status with the reason.
  static Result<Subprocess> spawn(const ProcessSpec& spec, const std::string& stderr_path);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  // Writes all of `bytes` to the child's stdin within the time given. A failed Status when the
  // child stopped reading or the time ran out (SIGPIPE never reaches the caller).
  Status send(std::string_view bytes, double timeout_seconds);

  // Waits up to timeout_seconds for one complete line of at most max_bytes.
  Result<Line> receive_line(double timeout_seconds, std::size_t max_bytes);

  // SIGKILL to the group and reap; what receive_line buffered is dropped. Idempotent.
  void kill();

  // The pid while the child has not been killed or seen to exit, else -1.
  pid_t pid() const;
  bool running() const;

 private:
  Subprocess();
  std::unique_ptr<process_detail::ChildProcess> child_;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string pending_;  // bytes after the last complete line
};

}  // namespace cudaagent
