// Private to lib/: the parent's side of owning a child process, shared by run_process (one
// blocking call) and Subprocess (a long-lived child spoken to line by line). Key design choice: the
// child is owned from fork on by an RAII guard that kills its whole group and reaps, so no return
// path or exception leaves a runaway or a zombie.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <system_error>

#include "cudaagent/base/errno_text.h"
#include "cudaagent/base/status.h"
#include "cudaagent/base/unique_fd.h"

namespace cudaagent::process_detail {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

// How long we keep reaping killed group members that were reparented to us.
inline constexpr double kReapGroupSeconds = 1.0;

// Clamped, so that a NaN, negative or absurd duration from a spec cannot overflow the clock.
inline TimePoint after(TimePoint from, double seconds) {
  seconds = seconds > 0 ? std::min(seconds, 1e8) : 0.0;
  return from + std::chrono::duration_cast<SteadyClock::duration>(
                    std::chrono::duration<double>(seconds));
}

inline double seconds_between(TimePoint from, TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

// A close-on-exec pipe whose ends are both >= 3: if the caller closed its own stdio, pipe2 hands
// out 0-2, and the child's dup2 onto 0-2 would then clobber an end it still needs.
inline Status make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::error("cannot create a pipe: " + errno_text(errno));
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
  for (UniqueFd* end : {&read_end, &write_end}) {
    if (end->get() > 2) continue;
    const int moved = ::fcntl(end->get(), F_DUPFD_CLOEXEC, 3);
    if (moved < 0) return Status::error("cannot move a pipe descriptor: " + errno_text(errno));
    end->reset(moved);
  }
  return Status::ok();
}

inline void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Owns a forked child (the leader of process group `pid`) until it is reaped. The destructor kills
// the whole group and reaps, so an early return or a bad_alloc never leaves a runaway or a zombie.
class ChildProcess {
 public:
  explicit ChildProcess(pid_t pid) : pid_(pid) {
    // The child calls setpgid itself too; doing it here as well means a signal we send to the
    // group before the child got that far still finds it (the shell idiom).
    ::setpgid(pid_, pid_);
    // Raw syscall: glibc 2.36's <sys/pidfd.h> lacks extern "C", so its wrapper cannot be linked
    // from C++.
    pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
  }
  ~ChildProcess() {
    if (!reaped_) {
      signal_all(SIGKILL);
      int status = 0;
      reap(&status, nullptr);
    }
    reap_group();
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // -1 when pidfds are unavailable; the caller then polls has_exited() on a short timer.
  int pidfd() const { return pidfd_.get(); }

  // Signals the group and the leader itself (which may have left the group). While the leader is
  // unreaped its pid, and so the group id, cannot be reused by an unrelated process.
  void signal_all(int sig) const {
    if (pid_ <= 1) return;  // never kill(-1) or kill(0)
    ::kill(-pid_, sig);
    if (!reaped_) ::kill(pid_, sig);
  }

  // True once the leader has exited (it stays a zombie until reap()). Also true if the status is
  // gone (SIGCHLD ignored, or another waiter took it), which reap() then reports.
  bool has_exited() const {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      return errno != EINTR;
    }
    return info.si_pid == pid_;
  }

  // Blocking wait4 for the leader. False when its status was collected elsewhere.
  bool reap(int* status, rusage* usage) {
    reaped_ = true;
    while (::wait4(pid_, status, 0, usage) < 0) {
      if (errno != EINTR) return false;
    }
    return true;
  }

 private:
  // Killed members of the group whose parent died were reparented to us if we are a subreaper;
  // reap them until the group is empty, so none is left a zombie. Without a subreaper they belong
  // to PID 1 and there is nothing for us to do.
  void reap_group() {
    int subreaper = 0;
    if (pid_ <= 1 || ::prctl(PR_GET_CHILD_SUBREAPER, &subreaper) != 0 || subreaper == 0) return;
    const TimePoint give_up = after(SteadyClock::now(), kReapGroupSeconds);
    while (true) {
      siginfo_t info{};
      while (::waitid(P_PGID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG) == 0 &&
             info.si_pid != 0) {
        info = {};
      }
      // Zombies count as members, so the group is empty exactly when all were reaped.
      if (::kill(-pid_, 0) != 0 || SteadyClock::now() >= give_up) return;
      const timespec pause{0, 2'000'000};
      ::nanosleep(&pause, nullptr);
    }
  }

  pid_t pid_;
  UniqueFd pidfd_;
  bool reaped_ = false;
};

}  // namespace cudaagent::process_detail
