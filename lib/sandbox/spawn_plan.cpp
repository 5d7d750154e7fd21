// The child's side of run_process: checking and resolving the spec before fork, then the
// async-signal-safe setup between fork and execve (process group, stdio, descriptors, limits,
// credentials, directory). Key design choice: failures travel to the parent as a ChildError on a
// close-on-exec pipe, so "could not exec" is a value the parent can tell apart from "exited 127".
#include "spawn_plan.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <string_view>
#include <system_error>

#include "cudaagent/base/errno_text.h"
#include "cudaagent/base/session.h"

namespace cudaagent::process_detail {
namespace {

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

[[noreturn]] void child_fail(int error_fd, ChildStage stage, int err, int detail = 0) {
  const ChildError report{static_cast<int>(stage), err, detail};
  while (::write(error_fd, &report, sizeof report) < 0 && errno == EINTR) {
  }
  ::_exit(127);
}

// Closes every descriptor >= 3 except keep[0..count), which is sorted ascending.
void close_fds_except(const int* keep, std::size_t count) {
  // close_range is Linux 5.9+; the loop is the fallback for older kernels or seccomp filters.
  bool ok = true;
  int from = 3;
  for (std::size_t i = 0; i < count && ok; ++i) {
    if (keep[i] > from) {
      ok = ::close_range(static_cast<unsigned>(from), static_cast<unsigned>(keep[i] - 1), 0) == 0;
    }
    from = std::max(from, keep[i] + 1);
  }
  ok = ok && ::close_range(static_cast<unsigned>(from), ~0U, 0) == 0;
  if (ok) return;
  rlimit nofile{};
  const rlim_t top = ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY
                         ? std::min<rlim_t>(nofile.rlim_cur, 1 << 20)
                         : 1 << 16;
  std::size_t next = 0;
  for (int fd = 3; fd < static_cast<int>(top); ++fd) {
    while (next < count && keep[next] < fd) ++next;
    if (next == count || keep[next] != fd) ::close(fd);
  }
}

}  // namespace

Result<ChildPlan> make_plan(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return Status::error("cannot run a process: argv[0] is empty");
  }
  ChildPlan plan;
  for (const std::string& arg : spec.argv) {
    if (has_nul(arg)) return Status::error("cannot run a process: argument contains a NUL byte");
    plan.argv.push_back(const_cast<char*>(arg.c_str()));
  }
  plan.argv.push_back(nullptr);
  const std::string* path_entry = nullptr;
  for (const std::string& entry : spec.env) {
    if (has_nul(entry) || entry.find('=') == std::string::npos || entry[0] == '=') {
      return Status::error("cannot run a process: malformed environment entry " + cudaagent::quoted(entry));
    }
    if (path_entry == nullptr && entry.starts_with("PATH=")) path_entry = &entry;
    plan.envp.push_back(const_cast<char*>(entry.c_str()));
  }
  plan.envp.push_back(nullptr);
  if (has_nul(spec.working_dir)) return Status::error("cannot run a process: NUL in working_dir");
  if (!spec.working_dir.empty()) plan.working_dir = spec.working_dir.c_str();

  const std::string& name = spec.argv[0];
  if (name.find('/') != std::string::npos) {
    plan.exec_paths.push_back(name);
  } else if (path_entry != nullptr) {
    // Empty PATH entries mean "the current directory" to execvp; for untrusted payloads we only
    // search where the caller said explicitly.
    std::string_view dirs = std::string_view(*path_entry).substr(5);
    while (!dirs.empty()) {
      const std::size_t colon = std::min(dirs.find(':'), dirs.size());
      if (colon > 0) plan.exec_paths.push_back(std::string(dirs.substr(0, colon)) + "/" + name);
      dirs.remove_prefix(std::min(colon + 1, dirs.size()));
    }
  }

  auto add_limit = [&plan](int resource, const char* limit_name, std::uint64_t soft,
                           std::uint64_t hard) {
    plan.rlimits[plan.rlimit_count++] = {resource, limit_name, {soft, hard}};
  };
  add_limit(RLIMIT_CORE, "RLIMIT_CORE", 0, 0);
  const ProcessLimits& limits = spec.limits;
  if (limits.cpu_seconds) {
    // One second between soft and hard: SIGXCPU first (a clear cause of death), SIGKILL after.
    const std::uint64_t soft = std::min<std::uint64_t>(*limits.cpu_seconds, RLIM_INFINITY - 1);
    add_limit(RLIMIT_CPU, "RLIMIT_CPU", soft, soft + 1);
  }
  if (limits.data_bytes) add_limit(RLIMIT_DATA, "RLIMIT_DATA", *limits.data_bytes, *limits.data_bytes);
  if (limits.address_space_bytes) {
    add_limit(RLIMIT_AS, "RLIMIT_AS", *limits.address_space_bytes, *limits.address_space_bytes);
  }
  if (limits.file_size_bytes) {
    add_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", *limits.file_size_bytes, *limits.file_size_bytes);
  }
  if (limits.open_files) {
    add_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", *limits.open_files, *limits.open_files);
  }
  if (limits.processes) {
    add_limit(RLIMIT_NPROC, "RLIMIT_NPROC", *limits.processes, *limits.processes);
  }
  if (spec.inherit_fds.size() > kMaxInheritedFds) {
    return Status::error("cannot run a process: more than " + std::to_string(kMaxInheritedFds) +
                         " descriptors to inherit");
  }
  plan.inherit_fds = spec.inherit_fds;
  std::sort(plan.inherit_fds.begin(), plan.inherit_fds.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  for (std::size_t i = 0; i < plan.inherit_fds.size(); ++i) {
    const auto [parent_fd, child_fd] = plan.inherit_fds[i];
    // 0-2 are stdio; a huge number would only fail later in the child (RLIMIT_NOFILE), where
    // the reason is harder to tell.
    if (child_fd < 3 || child_fd >= (1 << 20)) {
      return Status::error("cannot run a process: cannot inherit a descriptor as fd " +
                           std::to_string(child_fd) + " (must be from 3 to 1048575)");
    }
    if (i > 0 && plan.inherit_fds[i - 1].second == child_fd) {
      return Status::error("cannot run a process: fd " + std::to_string(child_fd) +
                           " is inherited twice");
    }
    if (parent_fd < 0 || ::fcntl(parent_fd, F_GETFD) < 0) {
      return Status::error("cannot run a process: descriptor " + std::to_string(parent_fd) +
                           " to inherit is not open");
    }
    plan.inherit_top = std::max(plan.inherit_top, child_fd + 1);
  }
  plan.run_as = spec.run_as;
  plan.parent_pid = ::getpid();
  return plan;
}

[[noreturn]] void child_main(const ChildPlan& plan) noexcept {
  int efd = plan.error_fd;
  // Dispositions before the mask: the parent blocked every signal around fork, so no signal can
  // reach a handler inherited from the parent. Ignored signals would survive execve otherwise.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    // glibc refuses its two internal real-time signals and SIGKILL/SIGSTOP cannot change: ignored.
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &default_action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) child_fail(efd, ChildStage::kSignals, errno);

  if (::setpgid(0, 0) != 0) child_fail(efd, ChildStage::kProcessGroup, errno);
  // Inherited descriptors are parked above every number the child will use before anything is
  // laid out, so no dup2 below can overwrite one still to be copied (a source may sit on 0-2 or
  // on another entry's target). The error pipe moves too if a target needs its number.
  const std::size_t inherit_count = plan.inherit_fds.size();
  std::array<int, kMaxInheritedFds + 1> keep{};
  for (std::size_t i = 0; i < inherit_count; ++i) {
    keep[i] = ::fcntl(plan.inherit_fds[i].first, F_DUPFD_CLOEXEC, plan.inherit_top);
    if (keep[i] < 0) child_fail(efd, ChildStage::kInheritFds, errno, plan.inherit_fds[i].second);
    if (plan.inherit_fds[i].second == efd) {
      const int moved = ::fcntl(efd, F_DUPFD_CLOEXEC, plan.inherit_top);
      if (moved < 0) child_fail(efd, ChildStage::kInheritFds, errno, efd);
      efd = moved;
    }
  }
  if (::dup2(plan.stdin_fd, 0) < 0 || ::dup2(plan.stdout_fd, 1) < 0 ||
      ::dup2(plan.stderr_fd, 2) < 0) {
    child_fail(efd, ChildStage::kStdio, errno);
  }
  // dup2 clears close-on-exec on the target, so exactly these numbers survive execve.
  for (std::size_t i = 0; i < inherit_count; ++i) {
    const int child_fd = plan.inherit_fds[i].second;
    if (::dup2(keep[i], child_fd) < 0) child_fail(efd, ChildStage::kInheritFds, errno, child_fd);
    keep[i] = child_fd;
  }
  // keep[] now holds the sorted targets; the error pipe is above or between them.
  std::size_t keep_count = inherit_count;
  std::size_t at = keep_count++;
  for (; at > 0 && keep[at - 1] > efd; --at) keep[at] = keep[at - 1];
  keep[at] = efd;
  close_fds_except(keep.data(), keep_count);

  for (std::size_t i = 0; i < plan.rlimit_count; ++i) {
    if (::setrlimit(static_cast<__rlimit_resource_t>(plan.rlimits[i].resource),
                    &plan.rlimits[i].value) != 0) {
      child_fail(efd, ChildStage::kRlimit, errno, static_cast<int>(i));
    }
  }
  if (plan.run_as) {
    // Only root may clear supplementary groups; an unprivileged caller asking for its own ids has
    // nothing to drop there, and setresuid below still refuses anything it may not do.
    if (::setgroups(0, nullptr) != 0 && ::geteuid() == 0) {
      child_fail(efd, ChildStage::kSetgroups, errno);
    }
    const gid_t gid = plan.run_as->gid;
    const uid_t uid = plan.run_as->uid;
    if (::setresgid(gid, gid, gid) != 0) child_fail(efd, ChildStage::kSetgid, errno);
    if (::setresuid(uid, uid, uid) != 0) child_fail(efd, ChildStage::kSetuid, errno);
  }
  // If the caller dies (even by SIGKILL), the child goes with it. Set after the uid change, which
  // clears it; the getppid check closes the race with a parent that died before this line.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(efd, ChildStage::kDeathSignal, errno);
  if (::getppid() != plan.parent_pid) ::_exit(127);

  if (plan.working_dir != nullptr && ::chdir(plan.working_dir) != 0) {
    child_fail(efd, ChildStage::kChdir, errno);
  }
  int exec_err = ENOENT;
  bool denied = false;
  for (const std::string& path : plan.exec_paths) {
    ::execve(path.c_str(), plan.argv.data(), plan.envp.data());
    exec_err = errno;
    // As execvp: keep searching past "not here", remember "not allowed", stop on anything else.
    if (exec_err == EACCES) {
      denied = true;
    } else if (exec_err != ENOENT && exec_err != ENOTDIR) {
      break;
    }
  }
  if (denied && (exec_err == ENOENT || exec_err == ENOTDIR)) exec_err = EACCES;
  child_fail(efd, ChildStage::kExec, exec_err);
}

std::string describe_child_error(const ChildError& e, const ProcessSpec& spec,
                                 const ChildPlan& plan) {
  const std::string reason = errno_text(e.err);
  switch (static_cast<ChildStage>(e.stage)) {
    case ChildStage::kSignals: return "cannot reset signals in the child: " + reason;
    case ChildStage::kProcessGroup: return "cannot create a process group: " + reason;
    case ChildStage::kStdio: return "cannot set up the child's standard streams: " + reason;
    case ChildStage::kRlimit: {
      const std::size_t i = std::min<std::size_t>(static_cast<std::size_t>(e.detail), 5);
      return "cannot set " + std::string(plan.rlimits[i].name) + " to " +
             std::to_string(plan.rlimits[i].value.rlim_max) + ": " + reason;
    }
    case ChildStage::kSetgroups: return "cannot clear supplementary groups: " + reason;
    case ChildStage::kSetgid:
      return "cannot switch to gid " + std::to_string(spec.run_as ? spec.run_as->gid : 0) + ": " +
             reason;
    case ChildStage::kSetuid:
      return "cannot switch to uid " + std::to_string(spec.run_as ? spec.run_as->uid : 0) + ": " +
             reason;
    case ChildStage::kDeathSignal: return "cannot set the parent-death signal: " + reason;
    case ChildStage::kChdir:
      return "cannot change to directory " + cudaagent::quoted(spec.working_dir) + ": " + reason;
    case ChildStage::kInheritFds:
      return "cannot pass a descriptor to the child as fd " + std::to_string(e.detail) + ": " +
             reason;
    case ChildStage::kExec: break;
  }
  return "cannot execute " + cudaagent::quoted(spec.argv[0]) + ": " + reason;
}

}  // namespace cudaagent::process_detail
