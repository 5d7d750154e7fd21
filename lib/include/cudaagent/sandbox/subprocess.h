// A long-lived child process spoken to line by line over its stdin and stdout: how verify and
// filter keep a harness worker that has imported torch once, and dedup its AST helper. Spawned
// with the same rules as run_process (argv without a shell, the exact environment, rlimits,
// run_as, inherit_fds, its own process group); the deadlines are per exchange instead of per
// process. The destructor kills the whole group and reaps it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cudaagent/base/status.h"
#include "cudaagent/sandbox/process.h"

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

  // Starts spec.argv. spec.stdin_data, the output caps and timeout_seconds are not used;
  // spec.stop is watched (watch_stop). The child's stderr is appended to `stderr_path` (created
  // 0600), or discarded when it is empty. A program that cannot be started is a failed Status
  // with the reason.
  static Result<Subprocess> spawn(const ProcessSpec& spec, const std::string& stderr_path);

  // As spawn, but the child's stderr is kept in an anonymous memory file that stderr_tail()
  // reads, for a message when the child fails. Bound it with spec.limits.file_size_bytes.
  static Result<Subprocess> spawn_keeping_stderr(const ProcessSpec& spec);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  // Makes send() and receive_line() honour a stop request (Session::stop_signal; null: none):
  // once it is non-zero they return stopped_status() within kStopPollSeconds instead of waiting
  // on. The child is left running: the caller decides (kill() ends it at once).
  void watch_stop(const std::atomic<int>* stop) { stop_ = stop; }

  // Writes all of `bytes` to the child's stdin within the time given. A failed Status when the
  // child stopped reading or the time ran out (SIGPIPE never reaches the caller).
  Status send(std::string_view bytes, double timeout_seconds);

  // Waits up to timeout_seconds for one complete line of at most max_bytes.
  Result<Line> receive_line(double timeout_seconds, std::size_t max_bytes);

  // SIGKILL to the group and reap; what receive_line buffered is dropped. Idempotent.
  void kill();

  // Gives the child up to grace_seconds to exit by itself (one that closed its stdout is usually
  // on its way out), then does what kill() does. Returns how the child ended: kExited with its
  // code, or kSignaled (SIGKILL when it had to be killed); nullopt when there was no child left
  // (already killed) or its status was collected elsewhere. Other fields are not filled.
  std::optional<ProcessResult> finish(double grace_seconds);

  // The last max_bytes of the child's stderr when it was kept (spawn_keeping_stderr), else
  // empty. Still readable after kill() and finish().
  std::string stderr_tail(std::size_t max_bytes) const;

  // The pid while the child has not been killed or seen to exit, else -1.
  pid_t pid() const;
  bool running() const;

 private:
  Subprocess();
  // Spawns with the child's stderr on (a duplicate of) err_fd, which the caller keeps; keep: hold
  // the duplicate for stderr_tail().
  static Result<Subprocess> spawn_with_stderr(const ProcessSpec& spec, int err_fd, bool keep);
  std::unique_ptr<process_detail::ChildProcess> child_;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string pending_;  // bytes after the last complete line
  int stderr_fd_ = -1;   // the kept stderr (a memfd), else -1
  const std::atomic<int>* stop_ = nullptr;
};

}  // namespace cudaagent
