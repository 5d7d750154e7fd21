// The sandbox launcher: probing each isolation layer by running bwrap for real, and turning a
// ProcessSpec plus a SandboxPolicy into one bwrap command line (the seccomp program is in
// sandbox_seccomp.cpp). Key design choice: binds are made at canonical host paths and the
// symlinks along each requested path are recreated, so the sandbox's tree has the host's shape
// without ever binding through a link.
#include "cudaagent/sandbox/sandbox.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "cudaagent/base/session.h"
#include "seccomp_filter.h"

namespace cudaagent {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;
// The command line uses --disable-userns and --size, both new in bwrap 0.8.0 (Debian 12's).
constexpr int kMinimumBwrapVersion[] = {0, 8};
// Symlink chains longer than this are not mirrored (the kernel gives up at 40 as well).
constexpr int kMaxLinkDepth = 40;

std::string first_line(std::string_view text) {
  const std::size_t end = text.find('\n');
  std::string line(text.substr(0, end));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// A bare name is looked up as a shell would, in this process's PATH, then /usr/bin and /bin.
std::string find_program(const std::string& name) {
  auto usable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    std::error_code ec;
    const fs::path absolute = fs::absolute(name, ec);
    return !ec && usable(absolute.string()) ? absolute.string() : std::string();
  }
  const char* env_path = std::getenv("PATH");
  std::string dirs = env_path != nullptr ? env_path : "";
  dirs += ":/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, colon - start);
    start = colon + 1;
    if (dir.empty() || dir[0] != '/') continue;  // never the current directory
    if (usable(dir + "/" + name)) return dir + "/" + name;
  }
  return {};
}

// "0.8.0" >= {0, 8}. Unparsable versions count as old.
bool version_at_least(const std::string& version, const int (&wanted)[2]) {
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return false;
  return major != wanted[0] ? major > wanted[0] : minor >= wanted[1];
}

int landlock_abi() {
#ifdef SYS_landlock_create_ruleset
  // LANDLOCK_CREATE_RULESET_VERSION (1U << 0), spelled out so older headers compile.
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1U);
  return abi > 0 ? static_cast<int>(abi) : 0;
#else
  return 0;
#endif
}

// Runs bwrap with `args` then `-- /bin/true`, and says why it failed ("" when it worked).
std::string try_bwrap(const std::string& bwrap, std::vector<std::string> args,
                      const std::vector<std::pair<int, int>>& inherit = {},
                      std::optional<ProcessCredentials> run_as = std::nullopt) {
  ProcessSpec spec;
  spec.argv = {bwrap, "--ro-bind", "/", "/", "--die-with-parent"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.argv.insert(spec.argv.end(), {"--", "/bin/true"});
  spec.working_dir = "/";
  spec.timeout_seconds = 5;
  spec.stdout_cap = spec.stderr_cap = 4096;
  spec.inherit_fds = inherit;
  spec.run_as = run_as;
  Result<ProcessResult> run = run_process(spec);
  if (!run) return run.status().message();
  const ProcessResult& r = run.value();
  if (r.outcome == ProcessResult::Outcome::kExited && r.exit_code == 0) return {};
  const std::string said = first_line(r.err);
  return said.empty() ? r.describe() : said;
}

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// ---- building the mount list ----

enum class MountKind { kReadOnly, kWritable, kDevice, kSymlink };

struct MountOp {
  MountKind kind;
  std::string target;  // for kSymlink: what the link says; else the host path bound
};

bool is_under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         (dir == "/" || path[dir.size()] == '/'));
}

// Records every symlink met while resolving `path` component by component, at its location with
// the parent resolved (so the link's own location contains no link), and follows link targets,
// so chains such as /usr/local/cuda -> /etc/alternatives/cuda -> /usr/local/cuda-13.0 resolve in
// the sandbox as on the host.
void mirror_links(const fs::path& path, int depth, std::map<std::string, std::string>& links) {
  if (depth > kMaxLinkDepth) return;
  fs::path resolved = "/";
  for (const fs::path& part : path.relative_path()) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      resolved = resolved.parent_path();
      continue;
    }
    const fs::path here = resolved / part;
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(here, ec))) {
      resolved = here;
      continue;
    }
    const fs::path target = fs::read_symlink(here, ec);
    if (ec) return;
    links.emplace(here.string(), target.string());
    mirror_links(target.is_absolute() ? target : resolved / target, depth + 1, links);
    resolved = fs::canonical(here, ec);
    if (ec) return;
  }
}

struct MountPlan {
  std::map<std::string, MountOp> ops;  // by destination; sorted, so parents precede children
  std::vector<std::string> notes;
};

Status add_paths(const std::vector<std::string>& paths, MountKind kind, MountPlan& plan,
                 std::map<std::string, std::string>& links) {
  for (const std::string& requested : paths) {
    const fs::path path = fs::path(requested).lexically_normal();
    if (!path.is_absolute()) {
      return Status::error("cannot sandbox: path " + cudaagent::quoted(requested) +
                           " is not absolute");
    }
    std::error_code ec;
    const fs::path canonical = fs::canonical(path, ec);
    if (ec) {
      plan.notes.push_back(cudaagent::quoted(requested) + " is not bound: " + ec.message());
      continue;
    }
    const auto [it, inserted] = plan.ops.try_emplace(canonical.string(), MountOp{kind, canonical});
    if (!inserted && it->second.kind != kind) {
      return Status::error("cannot sandbox: " + cudaagent::quoted(canonical.string()) +
                           " is listed with two different kinds of access");
    }
    mirror_links(path, 0, links);
  }
  return Status::ok();
}

// Drops binds that an enclosing bind of the same kind already provides (/lib's target /usr/lib
// when /usr is bound), then adds the links that no bind brings along: a link inside a bound
// directory comes with it, and recreating it would write into a read-only mount.
void finish_plan(const std::map<std::string, std::string>& links, MountPlan& plan) {
  std::vector<std::pair<std::string, MountKind>> kept;  // in order, so ancestors come first
  for (auto it = plan.ops.begin(); it != plan.ops.end();) {
    const bool redundant = std::any_of(kept.begin(), kept.end(), [&it](const auto& bind) {
      return bind.second == it->second.kind && is_under(it->first, bind.first);
    });
    if (redundant) {
      it = plan.ops.erase(it);
    } else {
      kept.emplace_back(it->first, it->second.kind);
      ++it;
    }
  }
  for (const auto& [dest, target] : links) {
    const bool covered = std::any_of(kept.begin(), kept.end(), [&dest](const auto& bind) {
      return is_under(dest, bind.first);
    });
    if (!covered) plan.ops.try_emplace(dest, MountOp{MountKind::kSymlink, target});
  }
}

}  // namespace

// ---- SandboxProbe ----

std::string SandboxProbe::summary() const {
  std::string text = bwrap ? "bwrap " + bwrap_version : "no bwrap";
  text += user_namespaces ? ", userns" : ", no userns";
  text += net_namespace ? ", netns" : ", no netns";
  text += pid_namespace ? ", pidns" : ", no pidns";
  text += seccomp ? ", seccomp" : ", no seccomp";
  text += landlock_abi > 0 ? ", landlock abi " + std::to_string(landlock_abi) : ", no landlock";
  return text;
}

bool SandboxProbe::meets_minimum() const {
  return bwrap && user_namespaces && pid_namespace && net_namespace && seccomp;
}

SandboxProbe probe_sandbox(const std::string& bwrap) {
  SandboxProbe probe;
  probe.landlock_abi = landlock_abi();
  probe.bwrap_path = find_program(bwrap);
  if (probe.bwrap_path.empty()) {
    probe.notes.push_back("bwrap: " + cudaagent::quoted(bwrap) + " not found (install bubblewrap)");
    return probe;
  }
  ProcessSpec version;
  version.argv = {probe.bwrap_path, "--version"};
  version.timeout_seconds = 5;
  Result<ProcessResult> said = run_process(version);
  if (said && said.value().outcome == ProcessResult::Outcome::kExited &&
      said.value().exit_code == 0) {
    // "bubblewrap 0.8.0"
    const std::string line = first_line(said.value().out);
    probe.bwrap_version = line.substr(line.rfind(' ') + 1);
  } else {
    probe.notes.push_back("bwrap: " + cudaagent::quoted(probe.bwrap_path) + " --version failed: " +
                          (said ? said.value().describe() : said.status().message()));
    return probe;
  }

  if (!version_at_least(probe.bwrap_version, kMinimumBwrapVersion)) {
    probe.notes.push_back("bwrap " + probe.bwrap_version + " is too old: 0.8.0 or later needed");
    return probe;
  }
  if (std::string why = try_bwrap(probe.bwrap_path, {}); !why.empty()) {
    probe.notes.push_back("bwrap cannot make a mount namespace: " + why);
    return probe;
  }
  probe.bwrap = true;
  auto layer = [&](const char* flag, const char* what, bool& field) {
    const std::string why = try_bwrap(probe.bwrap_path, {flag});
    field = why.empty();
    if (!field) probe.notes.push_back(std::string("no ") + what + ": " + why);
  };
  layer("--unshare-user", "user namespace", probe.user_namespaces);
  layer("--unshare-pid", "PID namespace", probe.pid_namespace);
  layer("--unshare-net", "network namespace", probe.net_namespace);

  Result<int> filter = sandbox_detail::seccomp_program_fd(true);
  if (!filter) {
    probe.notes.push_back("no seccomp: " + filter.status().message());
  } else {
    const FdCloser closer(filter.value());
    const std::string why =
        try_bwrap(probe.bwrap_path, {"--seccomp", "3"}, {{filter.value(), 3}});
    probe.seccomp = why.empty();
    if (!probe.seccomp) probe.notes.push_back("no seccomp: " + why);
  }

  if (::geteuid() == 0) {
    // Sandboxes of a root caller should run as another uid (see sandbox_command), which needs
    // unprivileged user namespaces: check that too, as nobody.
    const std::string why = try_bwrap(probe.bwrap_path, {"--unshare-user", "--unshare-pid"}, {},
                                      ProcessCredentials{kNobody, kNobody});
    probe.notes.push_back(
        why.empty() ? "running as root: give sandboxes an unprivileged ProcessSpec::run_as"
                    : "running as root, and bwrap cannot run as uid 65534: " + why);
  }
  if (probe.landlock_abi == 0) probe.notes.push_back("no Landlock in this kernel");
  return probe;
}

// ---- policy and command ----

std::vector<std::string> sandbox_system_paths() {
  return {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/alternatives", "/etc/ld.so.cache",
          "/etc/localtime"};
}

SandboxCommand::SandboxCommand(SandboxCommand&& other) noexcept
    : spec(std::move(other.spec)),
      notes(std::move(other.notes)),
      filter_fd_(std::exchange(other.filter_fd_, -1)) {}

SandboxCommand& SandboxCommand::operator=(SandboxCommand&& other) noexcept {
  if (this != &other) {
    if (filter_fd_ >= 0) ::close(filter_fd_);
    spec = std::move(other.spec);
    notes = std::move(other.notes);
    filter_fd_ = std::exchange(other.filter_fd_, -1);
  }
  return *this;
}

SandboxCommand::~SandboxCommand() {
  if (filter_fd_ >= 0) ::close(filter_fd_);
}

Result<SandboxCommand> sandbox_command(const ProcessSpec& inner, const SandboxPolicy& policy,
                                       const SandboxProbe& probe) {
  std::vector<std::string> missing;
  if (!probe.bwrap) missing.push_back("bwrap");
  if (!probe.user_namespaces) missing.push_back("user namespaces");
  if (!probe.pid_namespace) missing.push_back("PID namespaces");
  if (!policy.network && !probe.net_namespace) missing.push_back("network namespaces");
  if (policy.seccomp && !probe.seccomp) missing.push_back("seccomp");
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
    return Status::error("cannot sandbox: this machine lacks " + list + " (" + probe.summary() +
                         ")");
  }
  if (inner.argv.empty() || inner.argv[0].empty()) {
    return Status::error("cannot sandbox: argv[0] is empty");
  }

  MountPlan plan;
  std::map<std::string, std::string> links;
  if (Status s = add_paths(policy.read_only, MountKind::kReadOnly, plan, links); !s) return s;
  if (policy.bind_sys) {
    if (Status s = add_paths({"/sys"}, MountKind::kReadOnly, plan, links); !s) return s;
  }
  if (Status s = add_paths(policy.writable, MountKind::kWritable, plan, links); !s) return s;
  if (Status s = add_paths(policy.devices, MountKind::kDevice, plan, links); !s) return s;
  finish_plan(links, plan);

  SandboxCommand command;
  command.notes = std::move(plan.notes);
  ProcessSpec& outer = command.spec;
  std::vector<std::string>& argv = outer.argv;
  argv = {probe.bwrap_path, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
          "--unshare-cgroup-try", "--disable-userns"};
  if (!policy.network) argv.push_back("--unshare-net");
  // /proc stays writable (cuInit fails with error 304 when all of it is read-only: measured on
  // the H200 machine) except the files that reach the kernel as a whole, which host root could
  // otherwise write: sysctls, and sysrq where the kernel has it.
  argv.insert(argv.end(), {"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--proc",
                           "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--ro-bind-try",
                           "/proc/sysrq-trigger", "/proc/sysrq-trigger", "--dev", "/dev"});
  for (const char* tmpfs : {"/dev/shm", "/tmp"}) {
    if (policy.tmp_size_bytes > 0) {
      argv.insert(argv.end(), {"--size", std::to_string(policy.tmp_size_bytes)});
    }
    argv.insert(argv.end(), {"--tmpfs", tmpfs});
  }
  for (const auto& [dest, op] : plan.ops) {
    switch (op.kind) {
      case MountKind::kReadOnly: argv.insert(argv.end(), {"--ro-bind", op.target, dest}); break;
      case MountKind::kWritable: argv.insert(argv.end(), {"--bind", op.target, dest}); break;
      case MountKind::kDevice: argv.insert(argv.end(), {"--dev-bind", op.target, dest}); break;
      case MountKind::kSymlink: argv.insert(argv.end(), {"--symlink", op.target, dest}); break;
    }
  }
  // Last, once every mount point exists: nothing is writable but the binds and the two tmpfs.
  argv.insert(argv.end(), {"--remount-ro", "/dev", "--remount-ro", "/"});
  const std::string& chdir = !policy.working_dir.empty() ? policy.working_dir
                             : !inner.working_dir.empty() ? inner.working_dir
                                                          : std::string("/");
  argv.insert(argv.end(), {"--chdir", chdir, "--clearenv"});
  for (const std::string& entry : inner.env) {
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::error("cannot sandbox: malformed environment entry " +
                           cudaagent::quoted(entry));
    }
    argv.insert(argv.end(), {"--setenv", entry.substr(0, eq), entry.substr(eq + 1)});
  }

  outer.inherit_fds = inner.inherit_fds;
  if (policy.seccomp) {
    Result<int> filter = sandbox_detail::seccomp_program_fd(!policy.network);
    if (!filter) return filter.status().with_context("cannot sandbox");
    command.filter_fd_ = filter.value();
    int child_fd = 3;
    for (const auto& [from, to] : inner.inherit_fds) child_fd = std::max(child_fd, to + 1);
    outer.inherit_fds.emplace_back(command.filter_fd_, child_fd);
    argv.insert(argv.end(), {"--seccomp", std::to_string(child_fd)});
  }
  argv.emplace_back("--");
  argv.insert(argv.end(), inner.argv.begin(), inner.argv.end());

  // bwrap needs no environment of its own, and must not see one meant for the command
  // (LD_PRELOAD would act on bwrap itself).
  outer.env.clear();
  outer.working_dir = "/";
  outer.stdin_data = inner.stdin_data;
  outer.stdout_cap = inner.stdout_cap;
  outer.stderr_cap = inner.stderr_cap;
  outer.timeout_seconds = inner.timeout_seconds;
  outer.kill_grace_seconds = inner.kill_grace_seconds;
  outer.limits = inner.limits;
  outer.run_as = inner.run_as;
  outer.stop = inner.stop;
  return command;
}

}  // namespace cudaagent
