// Running one untrusted program to completion: scrubbed environment, resource limits, capped
// output, a wall-clock deadline and a process group that is killed whole. Key design choice: one
// blocking call (fork + execve, then a poll() loop in the caller's thread) that never needs a shell,
// a helper thread or a global signal handler, so stages can call it from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent {

// setrlimit() values applied in the child; unset ones are inherited. Soft and hard limits are both
// set, so the child cannot raise them again. RLIMIT_CORE is always 0.
struct ProcessLimits {
  // RLIMIT_CPU: SIGXCPU at this many seconds of CPU time, SIGKILL one second later.
  std::optional<std::uint64_t> cpu_seconds;
  // RLIMIT_AS: allocations beyond it fail (malloc returns null, mmap ENOMEM).
  std::optional<std::uint64_t> address_space_bytes;
  // RLIMIT_DATA: private writable memory (heap, anonymous mappings) beyond it fails. Unlike
  // RLIMIT_AS it leaves alone the driver's reserved-but-inaccessible address space, so it
  // bounds the host memory of a process that initialises CUDA.
  std::optional<std::uint64_t> data_bytes;
  // RLIMIT_FSIZE: writing past it raises SIGXFSZ.
  std::optional<std::uint64_t> file_size_bytes;
  // RLIMIT_NOFILE: the highest file descriptor number plus one.
  std::optional<std::uint64_t> open_files;
  // RLIMIT_NPROC counts every process of the child's real uid on the machine, not only this tree,
  // and does not bind root: use it together with ProcessSpec::run_as.
  std::optional<std::uint64_t> processes;
};

struct ProcessCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
};

// "UID" or "UID:GID" (numbers). A Status saying what is wrong otherwise.
Result<ProcessCredentials> parse_credentials(std::string_view text);

// The user a candidate's code runs as: "none" (the caller's own), "auto" (the conventional
// unprivileged nobody, 65534:65534, when the caller is root and the code runs sandboxed: the
// kernel's process limit does not bind root; otherwise the caller's own), or "UID[:GID]".
Result<std::optional<ProcessCredentials>> resolve_candidate_user(std::string_view choice, bool sandboxed);

struct ProcessSpec {
  // argv[0] names the program: a path with a '/' is used as is (relative to working_dir); a bare
  // name is looked up in the PATH entry of `env` (empty PATH entries are skipped, there is no
  // default PATH). No shell is ever involved.
  std::vector<std::string> argv;
  // The complete environment as "NAME=value" entries; nothing is inherited from the caller.
  std::vector<std::string> env;
  // Directory the child starts in (after dropping privileges); empty keeps the caller's.
  std::string working_dir;
  // Written to the child's stdin, which is then closed. A child that exits or closes stdin early
  // simply gets less; that is not an error.
  std::string stdin_data;
  // Bytes of stdout / stderr kept. The rest is read and discarded (so the child never blocks on a
  // full pipe) and the result is flagged truncated.
  std::size_t stdout_cap = std::size_t{16} << 20;
  std::size_t stderr_cap = std::size_t{1} << 20;
  // Wall-clock limit from the start of the spawn; <= 0 means none. At the deadline the whole
  // process group gets SIGTERM, and SIGKILL kill_grace_seconds later.
  double timeout_seconds = 60.0;
  double kill_grace_seconds = 1.0;
  ProcessLimits limits;
  // Switch the child to this uid/gid (supplementary groups cleared) before exec. Needs root or the
  // caller's own ids; a failure is reported as kSpawnFailed.
  std::optional<ProcessCredentials> run_as;
  // Descriptors the child gets beyond stdin, stdout and stderr, as (descriptor in the caller,
  // number in the child): how a sandbox launcher hands bwrap its seccomp filter or a status pipe.
  // Numbers in the child must be >= 3 and distinct, at most kMaxInheritedFds of them; the caller
  // keeps its descriptors open for the call and still owns them afterwards. The child shares
  // their open file descriptions, file offsets included. Every other descriptor is closed.
  std::vector<std::pair<int, int>> inherit_fds;
  // A stop request to honour (Session::stop_signal; null: none): once it is non-zero the whole
  // process group is killed at once (SIGKILL) and run_process returns a failed Status that says
  // so, never a result: a program cut short by a stop has no outcome to judge. Looked at every
  // kStopPollSeconds at most, so the child is gone within a fraction of a second. Honoured the
  // same way by Subprocess (its waits) and HarnessWorker (a worker started from this spec), and
  // carried through sandbox_command(), so a sandbox hook can hand it to everything it wraps.
  const std::atomic<int>* stop = nullptr;
};

// How often a wait that honours a stop request looks at it.
inline constexpr double kStopPollSeconds = 0.1;

// The Status every wait that honours a stop request returns when it was stopped:
// "stopped by signal 15 (SIGTERM)".
Status stopped_status(int signal_number);

inline constexpr std::size_t kMaxInheritedFds = 16;

struct ProcessResult {
  enum class Outcome {
    kExited,       // the program called exit: exit_code is set
    kSignaled,     // a signal ended it (a crash, SIGXCPU, an outside kill): signal is set
    kTimedOut,     // we stopped it at the deadline; signal or exit_code says how it ended
    kSpawnFailed,  // it never ran: spawn_error says why
  };
  Outcome outcome = Outcome::kSpawnFailed;
  int exit_code = -1;  // 0..255 when it exited, else -1
  int signal = 0;      // the signal that ended it, else 0
  std::string out;
  std::string err;
  bool out_truncated = false;
  bool err_truncated = false;
  // "cannot execute 'foo': No such file or directory" (kSpawnFailed only).
  std::string spawn_error;
  // The limit that was hit (kTimedOut only), for describe().
  double timeout_seconds = 0.0;
  // From just before the fork until the child was seen to exit.
  double wall_seconds = 0.0;
  // From wait4(): the child plus the descendants it waited for; descendants killed with the
  // group are not included.
  double user_cpu_seconds = 0.0;
  double system_cpu_seconds = 0.0;
  std::uint64_t max_rss_bytes = 0;
  // Harness worker jobs only: processes the job left running after its child ended (a daemon it
  // forked), killed by the worker before it answered. Never part of an honest job.
  int stray_processes = 0;

  // For people: "exited with code 3", "killed by signal 9 (SIGKILL)", "timed out after 2.0 s",
  // "failed to start: cannot execute 'x': No such file or directory".
  std::string describe() const;
};

// "exited", "signaled", "timed_out", "spawn_failed": stable names for records.
std::string_view outcome_name(ProcessResult::Outcome outcome);

// Runs spec.argv to completion and returns what happened. A program that cannot be started is a
// value (Outcome::kSpawnFailed), as is every way the program can end; a failed Status means our own
// machinery failed (pipe or fork refused, malformed spec: empty argv, a NUL inside a string, an env
// entry without '=', an inherit_fds entry that is closed, repeated or below 3). Blocks the calling
// thread; thread-safe (it touches only its own descriptors, all close-on-exec, and the calling
// thread's signal mask).
//
// The child leads a new process group. When the child exits, is killed, or times out, every
// process still in that group is sent SIGKILL, so backgrounded descendants do not survive the call.
// A descendant that calls setsid() or setpgid() leaves the group and escapes this (and its output
// pipes then keep us waiting at most half a second after the child's exit); containing that needs
// the PID-namespace sandbox, not this function.
//
// Orphaned descendants are reparented to the nearest subreaper or PID 1, which must reap them.
// After become_child_subreaper() they come back to the caller and run_process reaps those of its
// group; without it, their zombies are PID 1's business (see that function).
//
// The child's exit status must reach us: a caller that sets SIGCHLD to SIG_IGN or reaps with
// waitpid(-1) gets a failed Status instead of a result.
//
// SIGPIPE: writing stdin to a child that stopped reading must not kill the caller, whatever its
// SIGPIPE disposition. The calling thread blocks SIGPIPE for the duration of the call and consumes
// the SIGPIPE that its own failed write raised; the previous mask is restored on return.
Result<ProcessResult> run_process(const ProcessSpec& spec);

// Makes the calling process a child subreaper (prctl PR_SET_CHILD_SUBREAPER): descendants of its
// children that lose their parent are reparented to it instead of PID 1, so run_process can reap
// them. Where PID 1 does not reap orphans (as in some containers) this is what keeps killed
// grandchildren from staying zombies. Process-wide and idempotent; call it once from main before
// spawning. Zombies of processes that escaped the group (setsid) are not reaped by run_process and
// stay until the caller exits. Thread-safe.
Status become_child_subreaper();

}  // namespace cudaagent
