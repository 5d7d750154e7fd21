// Subprocess: spawn as run_process does, then talk. Key design choice: the child's stdin is one end
// of a socketpair, so a write to a child that went away fails with EPIPE through send(MSG_NOSIGNAL)
// instead of raising SIGPIPE in whatever thread called us; its stdout is a plain pipe read with
// poll() against a deadline.
#include "cudaagent/sandbox/subprocess.h"

#include "cudaagent/base/session.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "child_guard.h"
#include "spawn_plan.h"
#include "cudaagent/base/unique_fd.h"

namespace cudaagent {
namespace {

using process_detail::after;
using process_detail::SteadyClock;
using process_detail::TimePoint;

int remaining_ms(TimePoint deadline) {
  const TimePoint now = SteadyClock::now();
  if (deadline <= now) return 0;
  const double ms = std::ceil(std::chrono::duration<double>(deadline - now).count() * 1000.0);
  return ms >= double{INT_MAX} ? INT_MAX : static_cast<int>(ms);
}

// The time to wait in one poll(): up to the deadline, and no longer than kStopPollSeconds when a
// stop request is watched.
int wait_ms(TimePoint deadline, const std::atomic<int>* stop) {
  const int ms = remaining_ms(deadline);
  if (stop == nullptr) return ms;
  return std::min(ms, static_cast<int>(kStopPollSeconds * 1000));
}

// Both ends >= 3 and close-on-exec, as make_pipe does for pipes.
Status make_socketpair(UniqueFd& ours, UniqueFd& theirs) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Status::error("cannot create a socket pair: " + errno_text(errno));
  }
  ours.reset(fds[0]);
  theirs.reset(fds[1]);
  for (UniqueFd* end : {&ours, &theirs}) {
    if (end->get() > 2) continue;
    const int moved = ::fcntl(end->get(), F_DUPFD_CLOEXEC, 3);
    if (moved < 0) return Status::error("cannot move a socket descriptor: " + errno_text(errno));
    end->reset(moved);
  }
  return Status::ok();
}

}  // namespace

Subprocess::Subprocess() = default;

Subprocess::Subprocess(Subprocess&& other) noexcept
    : child_(std::move(other.child_)),
      stdin_fd_(std::exchange(other.stdin_fd_, -1)),
      stdout_fd_(std::exchange(other.stdout_fd_, -1)),
      pending_(std::move(other.pending_)),
      stderr_fd_(std::exchange(other.stderr_fd_, -1)),
      stop_(other.stop_) {}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    kill();
    if (stderr_fd_ >= 0) ::close(stderr_fd_);
    child_ = std::move(other.child_);
    stdin_fd_ = std::exchange(other.stdin_fd_, -1);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    pending_ = std::move(other.pending_);
    stderr_fd_ = std::exchange(other.stderr_fd_, -1);
    stop_ = other.stop_;
  }
  return *this;
}

Subprocess::~Subprocess() {
  kill();
  if (stderr_fd_ >= 0) ::close(stderr_fd_);
}

Result<Subprocess> Subprocess::spawn(const ProcessSpec& spec, const std::string& stderr_path) {
  const char* err_path = stderr_path.empty() ? "/dev/null" : stderr_path.c_str();
  UniqueFd err_file(::open(err_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
  if (!err_file.is_open()) return Status::error("cannot open " + cudaagent::quoted(err_path) + ": " + errno_text(errno));
  return spawn_with_stderr(spec, err_file.get(), false);
}

Result<Subprocess> Subprocess::spawn_keeping_stderr(const ProcessSpec& spec) {
  UniqueFd err_file(::memfd_create("cudaagent-stderr", MFD_CLOEXEC));
  if (!err_file.is_open()) return Status::error("cannot create a memory file: " + errno_text(errno));
  return spawn_with_stderr(spec, err_file.get(), true);
}

Result<Subprocess> Subprocess::spawn_with_stderr(const ProcessSpec& spec, int err_fd, bool keep) {
  Result<process_detail::ChildPlan> planned = process_detail::make_plan(spec);
  if (!planned) return planned.status();
  process_detail::ChildPlan& plan = planned.value();
  if (plan.exec_paths.empty()) {
    return Status::error("cannot execute " + cudaagent::quoted(spec.argv[0]) + ": not found in the PATH");
  }
  UniqueFd stdin_ours, stdin_theirs, out_read, out_write, error_read, error_write;
  if (Status s = make_socketpair(stdin_ours, stdin_theirs); !s) return s;
  if (Status s = process_detail::make_pipe(out_read, out_write); !s) return s;
  if (Status s = process_detail::make_pipe(error_read, error_write); !s) return s;
  // Above stdio, so that the child's dup2 onto 0-2 cannot clobber it.
  UniqueFd err_file(::fcntl(err_fd, F_DUPFD_CLOEXEC, 3));
  if (!err_file.is_open()) return Status::error("cannot duplicate a descriptor: " + errno_text(errno));
  plan.stdin_fd = stdin_theirs.get();
  plan.stdout_fd = out_write.get();
  plan.stderr_fd = err_file.get();
  plan.error_fd = error_write.get();

  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = ::fork();
  if (pid == 0) process_detail::child_main(plan);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return Status::error("cannot fork: " + errno_text(fork_errno));
  Subprocess process;
  process.child_ = std::make_unique<process_detail::ChildProcess>(pid);
  stdin_theirs.reset();
  out_write.reset();
  error_write.reset();
  if (keep) {
    process.stderr_fd_ = err_file.release();  // the memfd: one file, shared with the child
  } else {
    err_file.reset();
  }

  // A successful execve closes the error pipe (EOF); a child that gave up wrote its report first.
  // Another thread's fork may hold a copy of the write end, so wait a bounded time only.
  pollfd watch{error_read.get(), POLLIN, 0};
  if (::poll(&watch, 1, 10'000) > 0) {
    process_detail::ChildError report;
    if (::read(error_read.get(), &report, sizeof report) == static_cast<ssize_t>(sizeof report)) {
      return Status::error(process_detail::describe_child_error(report, spec, plan));
    }
  }
  const int flags = ::fcntl(out_read.get(), F_GETFL);
  if (flags >= 0) ::fcntl(out_read.get(), F_SETFL, flags | O_NONBLOCK);
  process.stdin_fd_ = stdin_ours.release();
  process.stdout_fd_ = out_read.release();
  process.stop_ = spec.stop;
  return process;
}

Status Subprocess::send(std::string_view bytes, double timeout_seconds) {
  if (stdin_fd_ < 0) return Status::error("the process is not running");
  const TimePoint deadline = after(SteadyClock::now(), timeout_seconds);
  while (!bytes.empty()) {
    const ssize_t n = ::send(stdin_fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Status::error("cannot write to the process: " + errno_text(errno));
    }
    if (stop_ != nullptr && stop_->load() != 0) return stopped_status(stop_->load());
    pollfd watch{stdin_fd_, POLLOUT, 0};
    const int ready = ::poll(&watch, 1, wait_ms(deadline, stop_));
    if (ready == 0 && remaining_ms(deadline) > 0) continue;  // a look at the stop request
    if (ready == 0) return Status::error("the process did not read its input in time");
    if (ready < 0 && errno != EINTR) return Status::error("cannot poll: " + errno_text(errno));
  }
  return Status::ok();
}

Result<Subprocess::Line> Subprocess::receive_line(double timeout_seconds, std::size_t max_bytes) {
  const TimePoint deadline = after(SteadyClock::now(), timeout_seconds);
  char buffer[65536];
  while (true) {
    if (const auto end = pending_.find('\n'); end != std::string::npos && end <= max_bytes) {
      Line line{Line::Kind::kLine, pending_.substr(0, end)};
      pending_.erase(0, end + 1);
      return line;
    }
    if (pending_.size() > max_bytes) return Line{Line::Kind::kTooLong, {}};
    if (stdout_fd_ < 0) return Line{Line::Kind::kClosed, {}};
    const ssize_t n = ::read(stdout_fd_, buffer, sizeof buffer);
    if (n > 0) {
      pending_.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      ::close(std::exchange(stdout_fd_, -1));
      continue;  // a last complete line may still be pending
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return Status::error("cannot read from the process: " + errno_text(errno));
    }
    if (stop_ != nullptr && stop_->load() != 0) return stopped_status(stop_->load());
    pollfd watch{stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&watch, 1, wait_ms(deadline, stop_));
    if (ready == 0 && remaining_ms(deadline) > 0) continue;  // a look at the stop request
    if (ready == 0) return Line{Line::Kind::kTimeout, {}};
    if (ready < 0 && errno != EINTR) return Status::error("cannot poll: " + errno_text(errno));
  }
}

void Subprocess::kill() {
  if (stdin_fd_ >= 0) ::close(std::exchange(stdin_fd_, -1));
  if (stdout_fd_ >= 0) ::close(std::exchange(stdout_fd_, -1));
  pending_.clear();
  child_.reset();  // SIGKILL to the group, reap
}

std::optional<ProcessResult> Subprocess::finish(double grace_seconds) {
  if (child_ == nullptr) return std::nullopt;
  const TimePoint deadline = after(SteadyClock::now(), grace_seconds);
  while (!child_->has_exited()) {
    const int ms = remaining_ms(deadline);
    if (ms == 0) break;
    if (child_->pidfd() >= 0) {
      pollfd watch{child_->pidfd(), POLLIN, 0};  // readable once the child has exited
      ::poll(&watch, 1, ms);
    } else {
      const timespec pause{0, 10'000'000};
      ::nanosleep(&pause, nullptr);
    }
  }
  // The leader is not reaped yet, so the group id cannot have been reused.
  child_->signal_all(SIGKILL);
  int status = 0;
  std::optional<ProcessResult> result;
  if (child_->reap(&status, nullptr)) {
    result.emplace();
    if (WIFEXITED(status)) {
      result->outcome = ProcessResult::Outcome::kExited;
      result->exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      result->outcome = ProcessResult::Outcome::kSignaled;
      result->signal = WTERMSIG(status);
    }
  }
  kill();  // the descriptors, and the rest of the group
  return result;
}

std::string Subprocess::stderr_tail(std::size_t max_bytes) const {
  if (stderr_fd_ < 0) return {};
  const off_t size = ::lseek(stderr_fd_, 0, SEEK_END);
  if (size <= 0) return {};
  const off_t from = std::max<off_t>(0, size - static_cast<off_t>(max_bytes));
  std::string text(static_cast<std::size_t>(size - from), '\0');
  const ssize_t n = ::pread(stderr_fd_, text.data(), text.size(), from);
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return text;
}

pid_t Subprocess::pid() const { return running() ? child_->pid() : -1; }

bool Subprocess::running() const { return child_ != nullptr && !child_->has_exited(); }

}  // namespace cudaagent
