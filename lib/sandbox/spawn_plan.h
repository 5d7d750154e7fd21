// Private to run_process: the child's side of a spawn, between fork and execve. Key design choice:
// make_plan does every allocation and check before fork, so child_main only makes async-signal-safe
// system calls (the caller may be multi-threaded) and reports failure through a close-on-exec pipe.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/sandbox/process.h"

namespace cudaagent::process_detail {

struct RlimitSetting {
  int resource = 0;
  const char* name = "";
  rlimit value{};
};

enum class ChildStage : int {
  kSignals, kProcessGroup, kStdio, kRlimit, kSetgroups, kSetgid, kSetuid, kDeathSignal, kChdir,
  kExec, kInheritFds,
};

// What a child writes to the error pipe before it gives up with _exit(127).
struct ChildError {
  int stage = 0;   // a ChildStage
  int err = 0;     // errno
  int detail = 0;  // index into ChildPlan::rlimits for kRlimit, the child's fd for kInheritFds
};

// Everything the child needs. The pointers in argv and envp point into the ProcessSpec, which must
// outlive the spawn; the caller fills in the four descriptors.
struct ChildPlan {
  std::vector<std::string> exec_paths;  // tried in order, as execvp would; empty: not found
  std::vector<char*> argv;              // null-terminated
  std::vector<char*> envp;              // null-terminated
  std::array<RlimitSetting, 6> rlimits{};
  std::size_t rlimit_count = 0;
  std::optional<ProcessCredentials> run_as;
  const char* working_dir = nullptr;
  // ProcessSpec::inherit_fds, checked; `inherit_top` is above every child number in it, so
  // descriptors parked there while the child rearranges its table cannot collide.
  std::vector<std::pair<int, int>> inherit_fds;
  int inherit_top = 3;
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1, error_fd = -1;
  pid_t parent_pid = 0;
};

// Checks the spec (argv[0] non-empty, no NUL bytes, env entries NAME=value, inherit_fds open,
// distinct and >= 3 in the child) and resolves argv[0] against the spec's PATH. A failed Status
// means the spec is malformed.
Result<ChildPlan> make_plan(const ProcessSpec& spec);

// Runs in the forked child and never returns: execve, or a ChildError on plan.error_fd and
// _exit(127). Expects the parent to have blocked all signals around fork.
[[noreturn]] void child_main(const ChildPlan& plan) noexcept;

// "cannot execute 'x': No such file or directory", for ProcessResult::spawn_error.
std::string describe_child_error(const ChildError& error, const ProcessSpec& spec,
                                 const ChildPlan& plan);

}  // namespace cudaagent::process_detail
