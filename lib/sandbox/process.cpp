// run_process, the parent's side: fork, then one poll() loop in the caller's thread that feeds
// stdin, drains capped stdout/stderr, wakes on a pidfd and enforces the deadline (the child's side
// is process_child.cpp, the guard that owns the child is child_process.h).
#include "cudaagent/sandbox/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cudaagent/base/session.h"
#include "child_guard.h"
#include "spawn_plan.h"
#include "cudaagent/base/unique_fd.h"

namespace cudaagent {
namespace {

using process_detail::after;
using process_detail::ChildError;
using process_detail::ChildPlan;
using process_detail::ChildProcess;
using process_detail::errno_text;
using process_detail::make_pipe;
using process_detail::seconds_between;
using process_detail::set_nonblocking;
using process_detail::SteadyClock;
using process_detail::TimePoint;

// After the child exits and its group is killed, pipes normally reach EOF at once; only a
// descendant that left the group (setsid) can hold them open, and it must not hold us long.
constexpr double kDrainAfterExitSeconds = 0.5;
constexpr std::size_t kChunk = 64 * 1024;

// Blocks SIGPIPE in the calling thread for its lifetime. A write to a pipe whose reader is gone
// raises SIGPIPE at the writing thread; blocked, it stays pending and write returns EPIPE, and
// consume() takes that pending signal away so it is not delivered when the mask is restored.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    // A SIGPIPE that was pending before us is someone else's; standard signals do not queue, so
    // consuming "ours" would also swallow it.
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &saved_);
  }
  ~SigpipeBlock() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

  void consume() {
    if (was_pending_) return;
    const timespec zero{};
    while (::sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }

 private:
  sigset_t pipe_{};
  sigset_t saved_{};
  bool was_pending_ = false;
};

struct OutputStream {
  UniqueFd fd;
  std::string* kept;
  std::size_t cap;
  bool* truncated;

  // Reads one chunk; closes the stream at end of file or on error.
  void read_some(char* buffer) {
    const ssize_t n = ::read(fd.get(), buffer, kChunk);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      fd.reset();
      return;
    }
    const std::size_t got = static_cast<std::size_t>(n);
    const std::size_t room = cap - std::min(cap, kept->size());
    kept->append(buffer, std::min(got, room));
    if (got > room) *truncated = true;
  }
};

int poll_timeout_ms(TimePoint now, std::optional<TimePoint> next) {
  if (!next) return -1;
  if (*next <= now) return 0;
  const double ms = std::ceil(seconds_between(now, *next) * 1000.0);
  return ms >= double{INT_MAX} ? INT_MAX : static_cast<int>(ms);
}

void fill_outcome(int status, const rusage& usage, ProcessResult& result) {
  if (WIFEXITED(status)) {
    result.outcome = ProcessResult::Outcome::kExited;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.outcome = ProcessResult::Outcome::kSignaled;
    result.signal = WTERMSIG(status);
  }
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
  };
  result.user_cpu_seconds = seconds(usage.ru_utime);
  result.system_cpu_seconds = seconds(usage.ru_stime);
  result.max_rss_bytes = static_cast<std::uint64_t>(std::max(usage.ru_maxrss, 0L)) * 1024;
}

}  // namespace

Result<ProcessResult> run_process(const ProcessSpec& spec) {
  Result<ChildPlan> planned = process_detail::make_plan(spec);
  if (!planned) return planned.status();
  ChildPlan& plan = planned.value();
  ProcessResult result;
  if (plan.exec_paths.empty()) {
    result.spawn_error = "cannot execute " + cudaagent::quoted(spec.argv[0]) + ": " + errno_text(ENOENT) +
                         " (the environment has no PATH)";
    return result;
  }

  UniqueFd stdin_read, stdin_write, error_read, error_write;
  OutputStream out{{}, &result.out, spec.stdout_cap, &result.out_truncated};
  OutputStream err{{}, &result.err, spec.stderr_cap, &result.err_truncated};
  UniqueFd out_write, err_write;
  if (Status s = make_pipe(stdin_read, stdin_write); !s) return s;
  if (Status s = make_pipe(out.fd, out_write); !s) return s;
  if (Status s = make_pipe(err.fd, err_write); !s) return s;
  if (Status s = make_pipe(error_read, error_write); !s) return s;
  plan.stdin_fd = stdin_read.get();
  plan.stdout_fd = out_write.get();
  plan.stderr_fd = err_write.get();
  plan.error_fd = error_write.get();

  SigpipeBlock sigpipe;
  const TimePoint start = SteadyClock::now();
  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = ::fork();
  if (pid == 0) process_detail::child_main(plan);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return Status::error("cannot fork: " + errno_text(fork_errno));
  ChildProcess child(pid);

  stdin_read.reset();
  out_write.reset();
  err_write.reset();
  error_write.reset();
  // The error pipe is read only once the child has exited, without blocking: a child that gave up
  // wrote its report before _exit, and a successful execve closed the pipe. Waiting for its EOF
  // instead could hang if another thread of the caller forked (without exec) in between and so
  // holds a copy of the write end.
  set_nonblocking(error_read.get());
  set_nonblocking(stdin_write.get());
  set_nonblocking(out.fd.get());
  set_nonblocking(err.fd.get());
  std::size_t stdin_offset = 0;
  if (spec.stdin_data.empty()) stdin_write.reset();

  const bool has_deadline = spec.timeout_seconds > 0;
  const TimePoint deadline = has_deadline ? after(start, spec.timeout_seconds) : TimePoint::max();
  std::optional<TimePoint> kill_at;
  std::optional<TimePoint> exited_at;
  bool timed_out = false;
  const std::unique_ptr<char[]> buffer(new char[kChunk]);

  while (true) {
    const TimePoint now = SteadyClock::now();
    if (spec.stop != nullptr && !exited_at) {
      if (const int stop = spec.stop->load(); stop != 0) {
        // The guard kills the whole group and reaps it on the way out.
        return stopped_status(stop);
      }
    }
    if (!exited_at && child.has_exited()) {
      exited_at = now;
      // Whatever the leader left behind in its group goes now; their output ends with them.
      child.signal_all(SIGKILL);
      stdin_write.reset();
    }
    if (exited_at) {
      if (!out.fd.is_open() && !err.fd.is_open()) break;
      if (now >= after(*exited_at, kDrainAfterExitSeconds)) break;
    } else {
      if (has_deadline && !timed_out && now >= deadline) {
        timed_out = true;
        child.signal_all(SIGTERM);
        child.signal_all(SIGCONT);  // a stopped process acts on SIGTERM only once it runs
        kill_at = after(now, spec.kill_grace_seconds);
      }
      if (kill_at && now >= *kill_at) {
        child.signal_all(SIGKILL);
        kill_at.reset();
      }
    }

    std::array<pollfd, 4> fds{};
    nfds_t count = 0;
    auto watch = [&](int fd, short events) {
      if (fd >= 0) fds[count++] = {fd, events, 0};
    };
    watch(stdin_write.get(), POLLOUT);
    watch(out.fd.get(), POLLIN);
    watch(err.fd.get(), POLLIN);
    if (!exited_at) watch(child.pidfd(), POLLIN);

    std::optional<TimePoint> next;
    if (exited_at) {
      next = after(*exited_at, kDrainAfterExitSeconds);
    } else {
      if (has_deadline && !timed_out) next = deadline;
      if (kill_at) next = next ? std::min(*next, *kill_at) : *kill_at;
      // Without a pidfd nothing wakes us when the child exits: look every 10 ms.
      if (child.pidfd() < 0) next = next ? std::min(*next, after(now, 0.01)) : after(now, 0.01);
      if (spec.stop != nullptr) {
        const TimePoint look = after(now, kStopPollSeconds);
        next = next ? std::min(*next, look) : look;
      }
    }
    const int ready = ::poll(fds.data(), count, poll_timeout_ms(now, next));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return Status::error("cannot poll the child's pipes: " + errno_text(errno));
    }
    for (nfds_t i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == stdin_write.get()) {
        const std::size_t left = spec.stdin_data.size() - stdin_offset;
        const ssize_t n = ::write(stdin_write.get(), spec.stdin_data.data() + stdin_offset, left);
        if (n > 0) {
          stdin_offset += static_cast<std::size_t>(n);
          if (stdin_offset == spec.stdin_data.size()) stdin_write.reset();
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          if (errno == EPIPE) sigpipe.consume();
          stdin_write.reset();  // the child stopped reading; it gets no more
        }
      } else if (fds[i].fd == out.fd.get()) {
        out.read_some(buffer.get());
      } else if (fds[i].fd == err.fd.get()) {
        err.read_some(buffer.get());
      }
    }
  }

  int status = 0;
  rusage usage{};
  if (!child.reap(&status, &usage)) {
    return Status::error("the child's exit status was collected elsewhere (is SIGCHLD ignored?)");
  }
  ChildError report;
  if (::read(error_read.get(), &report, sizeof report) == static_cast<ssize_t>(sizeof report)) {
    result = ProcessResult{};
    result.spawn_error = process_detail::describe_child_error(report, spec, plan);
    return result;
  }
  result.wall_seconds = seconds_between(start, *exited_at);
  fill_outcome(status, usage, result);
  if (timed_out) {
    result.outcome = ProcessResult::Outcome::kTimedOut;
    result.timeout_seconds = spec.timeout_seconds;
  }
  return result;
}

std::string ProcessResult::describe() const {
  switch (outcome) {
    case Outcome::kExited: return "exited with code " + std::to_string(exit_code);
    case Outcome::kSignaled: {
      std::string text = "killed by signal " + std::to_string(signal);
      if (const char* abbrev = ::sigabbrev_np(signal)) text += " (SIG" + std::string(abbrev) + ")";
      return text;
    }
    case Outcome::kTimedOut: {
      char text[64];
      std::snprintf(text, sizeof text, "timed out after %.1f s", timeout_seconds);
      return text;
    }
    case Outcome::kSpawnFailed: return "failed to start: " + spawn_error;
  }
  return "unknown outcome";
}

Status stopped_status(int signal_number) {
  std::string text = "stopped by signal " + std::to_string(signal_number);
  if (const char* abbrev = ::sigabbrev_np(signal_number)) text += " (SIG" + std::string(abbrev) + ")";
  return Status::error(text);
}

std::string_view outcome_name(ProcessResult::Outcome outcome) {
  switch (outcome) {
    case ProcessResult::Outcome::kExited: return "exited";
    case ProcessResult::Outcome::kSignaled: return "signaled";
    case ProcessResult::Outcome::kTimedOut: return "timed_out";
    case ProcessResult::Outcome::kSpawnFailed: return "spawn_failed";
  }
  return "unknown";
}

Status become_child_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    return Status::error("cannot become a child subreaper: " + errno_text(errno));
  }
  return Status::ok();
}

Result<ProcessCredentials> parse_credentials(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view uid_text = text.substr(0, colon);
  const std::string_view gid_text = colon == std::string_view::npos ? uid_text : text.substr(colon + 1);
  ProcessCredentials credentials;
  const auto number = [](std::string_view part, auto& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return !part.empty() && ec == std::errc() && end == part.data() + part.size();
  };
  if (!number(uid_text, credentials.uid) || !number(gid_text, credentials.gid)) {
    return Status::error("a user is UID or UID:GID (numbers), not '" + std::string(text) + "'");
  }
  return credentials;
}

Result<std::optional<ProcessCredentials>> resolve_candidate_user(std::string_view choice, bool sandboxed) {
  if (choice == "none") return std::optional<ProcessCredentials>{};
  if (choice == "auto") {
    if (::geteuid() == 0 && sandboxed) return std::optional<ProcessCredentials>(ProcessCredentials{65534, 65534});
    return std::optional<ProcessCredentials>{};
  }
  auto parsed = parse_credentials(choice);
  if (!parsed) return parsed.status();
  return std::optional<ProcessCredentials>(parsed.value());
}

}  // namespace cudaagent
