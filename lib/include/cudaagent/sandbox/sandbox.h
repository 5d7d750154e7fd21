// The OS sandbox for untrusted processes (cudaagent(7), SANDBOX): probe which isolation layers this machine
// offers, then wrap a ProcessSpec so it runs under bubblewrap with a read-only private root, no
// network, a PID namespace that dies whole, and a seccomp deny-list. Key design choice: no daemon
// and none of our code between fork and exec — bwrap does the setup from one argv we build, and
// the seccomp program (made with libseccomp) reaches it as an inherited memfd.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/sandbox/process.h"

namespace cudaagent {

// What probe_sandbox found. A layer is true only when it was exercised, not merely configured.
struct SandboxProbe {
  // bwrap was found, is 0.8.0 or later (the command line needs --disable-userns and --size), and
  // ran /bin/true in a sandbox with a mount namespace.
  bool bwrap = false;
  std::string bwrap_path;     // the absolute path that was run; empty when none was found
  std::string bwrap_version;  // "0.8.0"
  // bwrap created a user namespace (--unshare-user): capabilities inside mean nothing outside.
  // A root prober also tries bwrap as uid 65534, as its sandboxes should run (see
  // sandbox_command), and says in a note whether that worked.
  bool user_namespaces = false;
  // bwrap created a network namespace: the sandbox has a loopback of its own and nothing else.
  bool net_namespace = false;
  // bwrap created a PID namespace: the command runs under bwrap's reaper (PID 1), and when that
  // exits the kernel kills every process left in the namespace, setsid escapees included.
  bool pid_namespace = false;
  // Our seccomp program was built and a sandbox started with it loaded (bwrap --seccomp).
  bool seccomp = false;
  // The kernel's Landlock ABI (landlock_create_ruleset(NULL, 0, ..._VERSION)); 0 = none or
  // disabled. Reported, not applied: bwrap 0.8 has no Landlock option, and the mount namespace
  // already hides every path that is not bound.
  int landlock_abi = 0;
  // Why a layer is missing, and what else a person should know ("running as root: ...").
  std::vector<std::string> notes;

  // One line for logs and --version: "bwrap 0.8.0, userns, netns, pidns, seccomp, landlock abi 7";
  // missing layers read "no userns" and so on.
  std::string summary() const;
  // The minimum for running untrusted code: bwrap with user, mount, PID and network namespaces,
  // and seccomp. Callers refuse untrusted runs without it.
  bool meets_minimum() const;
};

// Finds bwrap (a bare name is looked up in this process's PATH, then /usr/bin and /bin) and tries
// each layer for real: a few bwrap runs of /bin/true and the Landlock ABI query. Never fails:
// what is missing is a false field plus a note. Takes well under a second. Thread-safe.
SandboxProbe probe_sandbox(const std::string& bwrap = "bwrap");

// What the sandboxed command may see and do. Paths are absolute host paths, bound at the same
// path inside; a path that is or passes through a symlink gets its target bound and the link
// recreated, so /lib -> usr/lib works as on the host. Missing paths are skipped with a note.
// Everything not listed is absent: the root is an empty read-only tmpfs.
struct SandboxPolicy {
  // Bound read-only. For Debian's python3 with torch: sandbox_system_paths() plus the Python
  // prefix if it is not under /usr, the CUDA toolkit, the harness directory and the job's inputs.
  std::vector<std::string> read_only;
  // Bound read-write: the job's scratch and output directories, nothing shared between jobs.
  std::vector<std::string> writable;
  // Device nodes bound with device access (--dev-bind), e.g. /dev/nvidia0, /dev/nvidiactl,
  // /dev/nvidia-uvm (and /dev/nvidia-uvm-tools if profiling). CUDA also needs bind_sys.
  std::vector<std::string> devices;
  // Bind /sys read-only: without it cuInit fails with CUDA_ERROR_OPERATING_SYSTEM (304).
  bool bind_sys = false;
  // Keep the caller's network namespace. Off: a namespace with only a loopback, and seccomp also
  // refuses IPv4/IPv6 sockets, so no IP stack is reachable at all.
  bool network = false;
  // Where the command starts; empty: the inner spec's working_dir, else "/".
  std::string working_dir;
  // Size of the private tmpfs on /tmp and of the one on /dev/shm (POSIX semaphores, which
  // Python's multiprocessing needs). Both are memory, so they are capped; 0 leaves the kernel's
  // default of half the RAM each.
  std::uint64_t tmp_size_bytes = std::uint64_t{1} << 30;
  // Load the seccomp deny-list (see sandbox_command). Off only for experiments.
  bool seccomp = true;
};

// The read-only paths a dynamically linked program and Debian's python3 (with python3-torch) need
// on a merged-/usr system: /usr, /bin, /sbin, /lib, /lib64, /etc/alternatives (torch's
// libblas.so.3 resolves through it), /etc/ld.so.cache, /etc/localtime. Not /etc as a whole: it
// holds the host's secrets and configuration. Without /etc/passwd, Python's getpass.getuser()
// (torch.compile's cache directory) needs USER or LOGNAME in the command's environment.
// Measured: Debian's torch imports with these alone; on the H200 machine torch from a venv
// under /opt (bound as well) ran CUDA, torch.compile and nvcc inside, with the GPU devices and
// bind_sys, as root and as uid 65534.
std::vector<std::string> sandbox_system_paths();

// A sandboxed command ready for run_process(command.spec). Move-only: it owns the memfd holding
// the seccomp program that spec.inherit_fds hands to bwrap. Run it once: bwrap reads the program
// through a shared file offset, so a second run finds it empty and bwrap refuses to start (it
// fails closed). Build a fresh one per run; that takes well under a millisecond.
class SandboxCommand {
 public:
  SandboxCommand() = default;
  SandboxCommand(SandboxCommand&& other) noexcept;
  SandboxCommand& operator=(SandboxCommand&& other) noexcept;
  SandboxCommand(const SandboxCommand&) = delete;
  SandboxCommand& operator=(const SandboxCommand&) = delete;
  ~SandboxCommand();

  ProcessSpec spec;
  // Binds that were skipped ("'/lib64' is not bound: No such file or directory"), for a log.
  std::vector<std::string> notes;

 private:
  friend Result<SandboxCommand> sandbox_command(const ProcessSpec&, const SandboxPolicy&,
                                                const SandboxProbe&);
  int filter_fd_ = -1;
};

// Wraps `inner` so that it runs under bwrap with `policy`:
//   * namespaces: user, mount, PID, IPC, UTS, cgroup (if possible), and network unless
//     policy.network; no further user namespaces inside (bwrap --disable-userns);
//   * --die-with-parent, --new-session (no controlling terminal, so no TIOCSTI), --cap-drop ALL;
//   * a fresh /proc with /proc/sys and /proc/sysrq-trigger covered read-only (measured: without
//     that, host root in the sandbox wrote the host's kernel.core_uses_pid — core_pattern would
//     be an escape; all of /proc read-only breaks cuInit), a minimal /dev remounted read-only,
//     sized tmpfs on /tmp and /dev/shm, the binds, and the root remounted read-only last;
//   * the environment is inner.env (--clearenv, then --setenv per entry) plus PWD, which bwrap
//     always sets to the working directory; argv[0] without a '/' is looked up in that PATH
//     inside the sandbox;
//   * seccomp (policy.seccomp): default allow; EPERM for ptrace, process_vm_readv/writev,
//     pidfd_getfd, process_madvise, perf_event_open, bpf, userfaultfd, keyctl, add_key,
//     request_key, the mount family (mount, umount2, pivot_root, chroot, fsopen, fsconfig,
//     fsmount, fspick, open_tree, move_mount, mount_setattr), unshare, setns, io_uring_*,
//     kexec_*, *_module, reboot, swapon/off, acct, syslog, quotactl, fanotify_init,
//     open_by_handle_at, name_to_handle_at, ioctl TIOCSTI/TIOCLINUX, clone with any CLONE_NEW*
//     flag, and socket(AF_INET/AF_INET6) unless policy.network; ENOSYS for clone3 (its flags sit
//     behind a pointer a filter cannot read, and libc then falls back to clone); 32-bit and x32
//     system calls kill the process.
// The outer spec keeps inner's stdin, output caps, timeout, limits, run_as and inherit_fds; bwrap
// itself gets an empty environment. bwrap is the process run_process watches: killing it kills
// the sandbox (--die-with-parent, then the PID namespace takes every descendant along).
// Inherited descriptors are capabilities: one passed in reaches its file or pipe even though no
// path to it is bound.
//
// Exit status: the command's exit code comes through bwrap; a command killed by signal N reads as
// exit code 128+N; bwrap's own failures (a bind it could not make, exec failing) exit 1 with
// "bwrap: ..." on stderr.
//
// Limits: never set limits.address_space_bytes for a process that initialises CUDA — the driver
// reserves virtual address space of about twice the device memory (~280 GB on an H200), so any
// RLIMIT_AS makes cuInit fail. limits.processes counts every process of the real uid on the host,
// bwrap's two (its monitor and the namespace's PID 1) included.
//
// Root: as host root without run_as, the command is uid 0 in a user namespace mapped to host uid
// 0. It has no capabilities and every mount it can reach is read-only except policy.writable,
// /tmp, /dev/shm and its own processes' files in /proc, but in policy.writable it can create
// set-uid-root files that outlive the sandbox on the host. Prefer inner.run_as with an
// unprivileged uid that owns the writable directories; bwrap then runs as that uid and must be
// able to reach every bound path (a Python under /root, mode 0700, is not).
//
// Fails (a Status) when the probe lacks a layer the policy needs (bwrap, user/PID namespaces, a
// network namespace unless policy.network, seccomp if policy.seccomp), when a policy path is not
// absolute, inner.argv is empty, an env entry is not NAME=value, or the seccomp program cannot be
// built. Thread-safe.
Result<SandboxCommand> sandbox_command(const ProcessSpec& inner, const SandboxPolicy& policy,
                                       const SandboxProbe& probe);

}  // namespace cudaagent
