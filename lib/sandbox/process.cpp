// run_process, the parent's side: pipes, fork, then one poll() loop in the caller's thread (the
// Supervisor) that feeds stdin, drains capped stdout/stderr, wakes on a pidfd and enforces the
// deadline; then the child's status (its side is spawn_plan.cpp, the guard that owns it
// child_guard.h).
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

// The pipes between us and the child: its stdin, capped stdout and stderr, and the pipe its
// side reports a failed exec on. The child's ends are open only until the fork.
struct ChildPipes {
  UniqueFd stdin_read, stdin_write, out_write, err_write, error_read, error_write;
  OutputStream out, err;
};

Status open_pipes(const ProcessSpec& spec, ProcessResult& result, ChildPipes& pipes, ChildPlan& plan) {
  pipes.out = OutputStream{{}, &result.out, spec.stdout_cap, &result.out_truncated};
  pipes.err = OutputStream{{}, &result.err, spec.stderr_cap, &result.err_truncated};
  if (Status s = make_pipe(pipes.stdin_read, pipes.stdin_write); !s) return s;
  if (Status s = make_pipe(pipes.out.fd, pipes.out_write); !s) return s;
  if (Status s = make_pipe(pipes.err.fd, pipes.err_write); !s) return s;
  if (Status s = make_pipe(pipes.error_read, pipes.error_write); !s) return s;
  plan.stdin_fd = pipes.stdin_read.get();
  plan.stdout_fd = pipes.out_write.get();
  plan.stderr_fd = pipes.err_write.get();
  plan.error_fd = pipes.error_write.get();
  return Status::ok();
}

// Forks with every signal blocked, so no handler of ours runs in the child before it execs.
Result<pid_t> fork_child(const ChildPlan& plan) {
  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = ::fork();
  if (pid == 0) process_detail::child_main(plan);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return Status::error("cannot fork: " + errno_text(fork_errno));
  return pid;
}

// After the fork: the child's ends closed, ours non-blocking. The error pipe is read only once the
// child has exited, without blocking: a child that gave up wrote its report before _exit, and a
// successful execve closed the pipe. Waiting for its EOF instead could hang if another thread of
// the caller forked (without exec) in between and so holds a copy of the write end.
void keep_parent_ends(ChildPipes& pipes, bool has_stdin) {
  pipes.stdin_read.reset();
  pipes.out_write.reset();
  pipes.err_write.reset();
  pipes.error_write.reset();
  set_nonblocking(pipes.error_read.get());
  set_nonblocking(pipes.stdin_write.get());
  set_nonblocking(pipes.out.fd.get());
  set_nonblocking(pipes.err.fd.get());
  if (!has_stdin) pipes.stdin_write.reset();
}

// One run's supervision in the caller's thread: the clock's decisions (stop, exit, deadline,
// kill), then a poll() over the pipes and the pidfd until the next of them.
class Supervisor {
 public:
  Supervisor(const ProcessSpec& spec, ChildProcess& child, ChildPipes& pipes, SigpipeBlock& sigpipe,
             TimePoint start)
      : spec_(spec), child_(child), pipes_(pipes), sigpipe_(sigpipe), has_deadline_(spec.timeout_seconds > 0),
        deadline_(has_deadline_ ? after(start, spec.timeout_seconds) : TimePoint::max()),
        buffer_(new char[kChunk]) {}

  // Until the child has exited and its output is drained (or the drain's grace is over); a Status
  // on a stop request (the guard then kills the group) or when poll fails.
  Status run() {
    while (true) {
      const TimePoint now = SteadyClock::now();
      if (spec_.stop != nullptr && !exited_at_) {
        // The guard kills the whole group and reaps it on the way out.
        if (const int stop = spec_.stop->load(); stop != 0) return stopped_status(stop);
      }
      if (act_on_clock(now)) return Status::ok();
      std::array<pollfd, 4> fds{};
      nfds_t count = 0;
      auto watch = [&](int fd, short events) {
        if (fd >= 0) fds[count++] = {fd, events, 0};
      };
      watch(pipes_.stdin_write.get(), POLLOUT);
      watch(pipes_.out.fd.get(), POLLIN);
      watch(pipes_.err.fd.get(), POLLIN);
      if (!exited_at_) watch(child_.pidfd(), POLLIN);
      if (::poll(fds.data(), count, poll_timeout_ms(now, next_wakeup(now))) < 0) {
        if (errno == EINTR) continue;
        return Status::error("cannot poll the child's pipes: " + errno_text(errno));
      }
      for (nfds_t i = 0; i < count; ++i) {
        if (fds[i].revents != 0) serve(fds[i].fd);
      }
    }
  }

  bool timed_out() const { return timed_out_; }
  TimePoint exited_at() const { return *exited_at_; }

 private:
  // Notices the child's exit and enforces the deadline; true when the run is over.
  bool act_on_clock(TimePoint now) {
    if (!exited_at_ && child_.has_exited()) {
      exited_at_ = now;
      // Whatever the leader left behind in its group goes now; their output ends with them.
      child_.signal_all(SIGKILL);
      pipes_.stdin_write.reset();
    }
    if (exited_at_) {
      return (!pipes_.out.fd.is_open() && !pipes_.err.fd.is_open()) ||
             now >= after(*exited_at_, kDrainAfterExitSeconds);
    }
    if (has_deadline_ && !timed_out_ && now >= deadline_) {
      timed_out_ = true;
      child_.signal_all(SIGTERM);
      child_.signal_all(SIGCONT);  // a stopped process acts on SIGTERM only once it runs
      kill_at_ = after(now, spec_.kill_grace_seconds);
    }
    if (kill_at_ && now >= *kill_at_) {
      child_.signal_all(SIGKILL);
      kill_at_.reset();
    }
    return false;
  }

  // When the clock next needs us even if no pipe is ready (none: only a pipe or the pidfd).
  std::optional<TimePoint> next_wakeup(TimePoint now) const {
    if (exited_at_) return after(*exited_at_, kDrainAfterExitSeconds);
    std::optional<TimePoint> next;
    const auto sooner = [&next](TimePoint at) { next = next ? std::min(*next, at) : at; };
    if (has_deadline_ && !timed_out_) next = deadline_;
    if (kill_at_) sooner(*kill_at_);
    // Without a pidfd nothing wakes us when the child exits: look every 10 ms.
    if (child_.pidfd() < 0) sooner(after(now, 0.01));
    if (spec_.stop != nullptr) sooner(after(now, kStopPollSeconds));
    return next;
  }

  // One ready descriptor: more of stdin written, or a chunk of output read.
  void serve(int fd) {
    if (fd == pipes_.stdin_write.get()) {
      const std::string& data = spec_.stdin_data;
      const ssize_t n = ::write(fd, data.data() + stdin_offset_, data.size() - stdin_offset_);
      if (n > 0) {
        stdin_offset_ += static_cast<std::size_t>(n);
        if (stdin_offset_ == data.size()) pipes_.stdin_write.reset();
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        if (errno == EPIPE) sigpipe_.consume();
        pipes_.stdin_write.reset();  // the child stopped reading; it gets no more
      }
    } else if (fd == pipes_.out.fd.get()) {
      pipes_.out.read_some(buffer_.get());
    } else if (fd == pipes_.err.fd.get()) {
      pipes_.err.read_some(buffer_.get());
    }
  }

  const ProcessSpec& spec_;
  ChildProcess& child_;
  ChildPipes& pipes_;
  SigpipeBlock& sigpipe_;
  const bool has_deadline_;
  const TimePoint deadline_;
  std::optional<TimePoint> kill_at_, exited_at_;
  bool timed_out_ = false;
  std::size_t stdin_offset_ = 0;
  const std::unique_ptr<char[]> buffer_;
};

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
  ChildPipes pipes;
  if (Status s = open_pipes(spec, result, pipes, plan); !s) return s;
  SigpipeBlock sigpipe;
  const TimePoint start = SteadyClock::now();
  Result<pid_t> pid = fork_child(plan);
  if (!pid) return pid.status();
  ChildProcess child(pid.value());
  keep_parent_ends(pipes, !spec.stdin_data.empty());
  Supervisor supervisor(spec, child, pipes, sigpipe, start);
  if (Status s = supervisor.run(); !s) return s;

  int status = 0;
  rusage usage{};
  if (!child.reap(&status, &usage)) {
    return Status::error("the child's exit status was collected elsewhere (is SIGCHLD ignored?)");
  }
  ChildError report;
  if (::read(pipes.error_read.get(), &report, sizeof report) == static_cast<ssize_t>(sizeof report)) {
    result = ProcessResult{};
    result.spawn_error = process_detail::describe_child_error(report, spec, plan);
    return result;
  }
  result.wall_seconds = seconds_between(start, supervisor.exited_at());
  fill_outcome(status, usage, result);
  if (supervisor.timed_out()) {
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
