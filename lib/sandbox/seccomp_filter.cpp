// The sandbox's seccomp program, compiled with libseccomp and exported as BPF into a sealed memfd
// that bwrap reads (--seccomp FD). Key design choice: errors (EPERM, ENOSYS) rather than kills
// for denied calls, so a refused call shows up as a Python exception in the candidate's stderr
// instead of a mysterious death; only foreign-architecture calls, which no honest program makes,
// kill.
#include "seccomp_filter.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <system_error>

#include "cudaagent/base/errno_text.h"

#if CUDAAGENT_HAVE_SECCOMP
#include <seccomp.h>
#endif

namespace cudaagent::sandbox_detail {

#if CUDAAGENT_HAVE_SECCOMP && (defined(__x86_64__) || defined(__aarch64__))

namespace {

// Refused with EPERM. Debugging and reading other processes' memory (the PID namespace already
// hides the host's processes; these keep the candidate from tampering with the trusted harness
// in its own sandbox), kernel attack surface no kernel-writing candidate needs (bpf, io_uring —
// whose operations bypass seccomp entirely —, userfaultfd, keyrings, perf), anything that
// changes mounts or namespaces (bwrap has finished with them by now), and calls that need
// capabilities the sandbox does not have anyway (refused here too, in case one leaks).
constexpr const char* kDenied[] = {
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise",
    "perf_event_open", "bpf", "userfaultfd", "keyctl", "add_key", "request_key",
    "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
    "open_tree", "move_mount", "mount_setattr", "unshare", "setns",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "syslog", "quotactl", "fanotify_init",
    "open_by_handle_at", "name_to_handle_at",
};

// clone(2)'s first argument on x86_64 and aarch64 is the flags word. CLONE_NEWTIME is left out:
// clone() cannot take it (that bit is part of the exit signal there), only clone3 and unshare,
// both refused whole.
constexpr unsigned long kNamespaceFlags[] = {
    CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
    CLONE_NEWNET,
};

struct ContextDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

// libseccomp returns -errno.
Status check(int rc, const std::string& what) {
  if (rc == 0) return Status::ok();
  return Status::error("cannot build the seccomp program: " + what + ": " + errno_text(-rc));
}

// int-typed arguments (socket's domain, ioctl's request) are compared on their low 32 bits: the
// kernel ignores the upper half of the register, so a filter that compared all 64 bits could be
// dodged by setting them.
constexpr scmp_datum_t kLow32 = 0xffffffffU;

}  // namespace

Result<int> seccomp_program_fd(bool deny_inet) {
  std::unique_ptr<void, ContextDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return Status::error("cannot build the seccomp program: seccomp_init failed");
  // Only the native architecture is allowed through: a 64-bit process can still make i386 system
  // calls (int 0x80) or x32 ones, whose numbers the rules below would not match.
  if (Status s = check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS),
                       "setting the bad-architecture action");
      !s) {
    return s;
  }
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  for (const char* name : kDenied) {
    const int nr = seccomp_syscall_resolve_name(name);
    // A name this libseccomp does not know would silently stay allowed: refuse instead.
    if (nr == __NR_SCMP_ERROR) {
      return Status::error(std::string("cannot build the seccomp program: libseccomp does not "
                                       "know the system call '") + name + "'");
    }
    if (Status s = check(seccomp_rule_add(ctx.get(), eperm, nr, 0), name); !s) return s;
  }
  if (Status s = check(seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0),
                       "clone3");
      !s) {
    return s;
  }
  for (const unsigned long flag : kNamespaceFlags) {
    if (Status s = check(seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(clone), 1,
                                          SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)),
                         "clone");
        !s) {
      return s;
    }
  }
  // Typing into the caller's terminal (TIOCSTI) and the console (TIOCLINUX). --new-session
  // already leaves the sandbox without a controlling terminal; this holds for any tty fd passed in.
  for (const unsigned long request : {static_cast<unsigned long>(TIOCSTI),
                                      static_cast<unsigned long>(TIOCLINUX)}) {
    if (Status s = check(seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(ioctl), 1,
                                          SCMP_A1(SCMP_CMP_MASKED_EQ, kLow32, request)),
                         "ioctl");
        !s) {
      return s;
    }
  }
  if (deny_inet) {
    for (const int domain : {AF_INET, AF_INET6}) {
      if (Status s = check(seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(socket), 1,
                                            SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32,
                                                    static_cast<scmp_datum_t>(domain))),
                           "socket");
          !s) {
        return s;
      }
    }
  }

  const int fd = ::memfd_create("cudaagent-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return Status::error("cannot create a memfd for the seccomp program: " + errno_text(errno));
  }
  const int rc = seccomp_export_bpf(ctx.get(), fd);
  // Sealed, so that whoever else ends up holding the descriptor cannot rewrite the program
  // between now and bwrap reading it.
  if (rc != 0 || ::lseek(fd, 0, SEEK_SET) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    const int err = rc != 0 ? -rc : errno;
    ::close(fd);
    return Status::error("cannot export the seccomp program: " + errno_text(err));
  }
  return fd;
}

#else

Result<int> seccomp_program_fd(bool /*deny_inet*/) {
#if !CUDAAGENT_HAVE_SECCOMP
  return Status::error("cudaagent was built without libseccomp (install libseccomp-dev)");
#else
  return Status::error("the seccomp program is written for x86_64 and aarch64 only");
#endif
}

#endif

}  // namespace cudaagent::sandbox_detail
