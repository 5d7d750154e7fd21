// The sandbox against real attacks from inside it: network, filesystem, escaping processes,
// forbidden system calls, the environment and the deadline, each with a control run that shows
// the check is not vacuous. Needs bwrap, user namespaces and seccomp; without them every test that
// runs bwrap is skipped with a message, so a machine lacking them still passes.
#include "cudaagent/base/files.h"
#include "cudaagent/sandbox/sandbox.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

using cudaagent::ProcessResult;
using cudaagent::ProcessSpec;
using cudaagent::SandboxPolicy;
using cudaagent::SandboxProbe;
using cudaagent::testing::TempDir;
using Outcome = cudaagent::ProcessResult::Outcome;

namespace {

namespace fs = std::filesystem;

const char* const kPython = "/usr/bin/python3";

// Probed once: every bwrap test needs it and it costs ~100 ms.
const SandboxProbe& probe() {
  static const SandboxProbe probed = cudaagent::probe_sandbox();
  return probed;
}

bool sandbox_available() {
  if (probe().meets_minimum()) return true;
  MESSAGE("sandbox tests skipped: " << probe().summary());
  return false;
}

SandboxPolicy base_policy() {
  SandboxPolicy policy;
  policy.read_only = cudaagent::sandbox_system_paths();
  return policy;
}

ProcessSpec command(std::vector<std::string> argv) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.timeout_seconds = 10;
  return spec;
}

ProcessSpec python(const std::string& script) { return command({kPython, "-I", "-c", script}); }

ProcessResult run_sandboxed(const ProcessSpec& inner, const SandboxPolicy& policy) {
  auto sandboxed = cudaagent::sandbox_command(inner, policy, probe());
  REQUIRE_MESSAGE(sandboxed.is_ok(), sandboxed.status().message());
  auto result = cudaagent::run_process(sandboxed.value().spec);
  REQUIRE_MESSAGE(result.is_ok(), result.status().message());
  return std::move(result).value();
}

// Processes on the host whose command line contains `token`, zombies included.
int count_processes_with(const std::string& token) {
  int count = 0;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator("/proc", ignored)) {
    // read_whole_file, not istreambuf_iterator: GCC 12 at -O3 reports a false null dereference
    // inside <streambuf> for the iterator form.
    std::string cmdline;
    if (!cudaagent::read_whole_file((entry.path() / "cmdline").string(), cmdline)) continue;
    count += cmdline.find(token) != std::string::npos ? 1 : 0;
  }
  return count;
}

std::uintmax_t size_of(const fs::path& path) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

// A shell loop, detached twice (subshell + setsid) so that neither the process group kill of
// run_process nor the death of its parent reaches it: only the PID namespace can.
std::string escapee(const fs::path& marker, const std::string& token) {
  return "( setsid /bin/sh -c 'while :; do echo " + token + " >> " + marker.string() +
         "; sleep 0.02; done' & ) ; ";
}

// The escapee wrote something, has stopped writing, and no process of it is left on the host.
void check_escapee_gone(const fs::path& marker, const std::string& token) {
  CHECK(size_of(marker) > 0);
  for (int i = 0; i < 50 && count_processes_with(token) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(count_processes_with(token) == 0);
  const std::uintmax_t before = size_of(marker);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  CHECK(size_of(marker) == before);
}

bool contains_sequence(const std::vector<std::string>& argv, std::vector<std::string> seq) {
  return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
}

}  // namespace

TEST_CASE("the probe finds bwrap, the namespaces and seccomp, quickly") {
  const auto start = std::chrono::steady_clock::now();
  const SandboxProbe fresh = cudaagent::probe_sandbox();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("probe: " << fresh.summary() << " in " << seconds << " s");
  for (const std::string& note : fresh.notes) MESSAGE("note: " << note);
  CHECK(seconds < 1.0);
  CHECK(fresh.summary().find(fresh.bwrap ? "bwrap " : "no bwrap") == 0);
  if (!sandbox_available()) return;
  CHECK(fs::path(fresh.bwrap_path).is_absolute());
  CHECK_FALSE(fresh.bwrap_version.empty());
  CHECK(fresh.summary().find(", userns, netns, pidns, seccomp, ") != std::string::npos);

  const SandboxProbe missing = cudaagent::probe_sandbox("/no/such/bwrap");
  CHECK_FALSE(missing.bwrap);
  CHECK_FALSE(missing.meets_minimum());
  CHECK(missing.summary().find("no bwrap, no userns") == 0);
}

TEST_CASE("sandbox_command builds one bwrap command line from the policy") {
  SandboxProbe fake;  // no bwrap run needed: this checks the argv only
  fake.bwrap = fake.user_namespaces = fake.net_namespace = fake.pid_namespace = true;
  fake.bwrap_path = "/usr/bin/bwrap";
  fake.bwrap_version = "0.8.0";
  TempDir dir;
  const std::string out = fs::canonical(dir.path()).string();
  SandboxPolicy policy;
  policy.seccomp = false;
  policy.read_only = {"/usr", "/lib", "/no/such/path"};
  policy.writable = {out};
  policy.devices = {"/dev/null"};
  ProcessSpec inner = command({"python3", "x.py"});
  inner.env.push_back("A=1 2");
  inner.timeout_seconds = 7;
  inner.stdin_data = "in";

  auto made = cudaagent::sandbox_command(inner, policy, fake);
  REQUIRE_MESSAGE(made.is_ok(), made.status().message());
  const ProcessSpec& spec = made.value().spec;
  const std::vector<std::string>& argv = spec.argv;
  CHECK(argv.front() == "/usr/bin/bwrap");
  CHECK(contains_sequence(argv, {"--unshare-net"}));
  CHECK(contains_sequence(argv, {"--disable-userns"}));
  CHECK(contains_sequence(argv, {"--ro-bind", "/usr", "/usr"}));
  if (fs::is_symlink("/lib")) {
    // Merged /usr: /lib is recreated as the host's link, and its target comes with /usr.
    CHECK(contains_sequence(argv, {"--symlink", fs::read_symlink("/lib").string(), "/lib"}));
    CHECK_FALSE(contains_sequence(argv, {"--ro-bind", "/usr/lib", "/usr/lib"}));
  }
  CHECK(contains_sequence(argv, {"--bind", out, out}));
  CHECK(contains_sequence(argv, {"--dev-bind", "/dev/null", "/dev/null"}));
  CHECK(std::find(argv.begin(), argv.end(), "/no/such/path") == argv.end());
  REQUIRE(made.value().notes.size() == 1);
  CHECK(made.value().notes[0].find("'/no/such/path' is not bound") == 0);
  CHECK(contains_sequence(argv, {"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv",
                                 "A", "1 2", "--", "python3", "x.py"}));
  CHECK(argv.back() == "x.py");
  CHECK(std::find(argv.begin(), argv.end(), "--seccomp") == argv.end());
  CHECK(spec.env.empty());
  CHECK(spec.timeout_seconds == 7);
  CHECK(spec.stdin_data == "in");

  policy.network = true;
  made = cudaagent::sandbox_command(inner, policy, fake);
  REQUIRE(made.is_ok());
  CHECK_FALSE(contains_sequence(made.value().spec.argv, {"--unshare-net"}));

  policy.read_only = {"usr"};
  made = cudaagent::sandbox_command(inner, policy, fake);
  REQUIRE_FALSE(made.is_ok());
  CHECK(made.status().message() == "cannot sandbox: path 'usr' is not absolute");

  policy.read_only.clear();
  policy.seccomp = true;  // the fake probe has no seccomp: refused, never silently dropped
  made = cudaagent::sandbox_command(inner, policy, fake);
  REQUIRE_FALSE(made.is_ok());
  CHECK(made.status().message().find("cannot sandbox: this machine lacks seccomp") == 0);
  made = cudaagent::sandbox_command(inner, policy, SandboxProbe{});
  REQUIRE_FALSE(made.is_ok());
  CHECK(made.status().message().find("lacks bwrap, user namespaces") != std::string::npos);
}

TEST_CASE("inside, no IP network is reachable: not the host's loopback, not even a socket") {
  if (!sandbox_available()) return;
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  const std::string script =
      "import socket\n"
      "try:\n"
      "  s = socket.socket(); s.settimeout(2); s.connect(('127.0.0.1', " +
      std::to_string(ntohs(address.sin_port)) +
      "))\n"
      "  print('connected')\n"
      "except OSError as e:\n"
      "  print(type(e).__name__)\n";

  SandboxPolicy policy = base_policy();
  CHECK(run_sandboxed(python(script), policy).out == "PermissionError\n");  // seccomp
  policy.seccomp = false;
  // The sandbox's own loopback (bwrap brings it up) has no listener on that port.
  CHECK(run_sandboxed(python(script), policy).out == "ConnectionRefusedError\n");
  policy.seccomp = true;
  policy.network = true;
  CHECK(run_sandboxed(python(script), policy).out == "connected\n");  // the control
  ::close(listener);
}

TEST_CASE("inside, only bound paths exist, read-only ones refuse writes, the rest is private") {
  if (!sandbox_available()) return;
  TempDir dir;
  const fs::path host = fs::canonical(dir.path());
  fs::create_directories(host / "ro");
  fs::create_directories(host / "rw");
  cudaagent::testing::write_file((host / "secret").string(), "secret");
  cudaagent::testing::write_file((host / "ro" / "data").string(), "data");
  const std::string private_tmp = "/tmp/cudaagent-sandbox-private-" + std::to_string(::getpid());
  const std::string script =
      "import os\n"
      "def attempt(path, mode='w'):\n"
      "  try:\n"
      "    with open(path, mode) as f:\n"
      "      return f.read() if mode == 'r' else 'wrote' if f.write('x') else ''\n"
      "  except OSError as e:\n"
      "    return os.strerror(e.errno)\n"
      // Opened, never written: should the protection ever fail, nothing reaches the kernel.
      "def open_for_write(path):\n"
      "  try:\n"
      "    os.close(os.open(path, os.O_WRONLY))\n"
      "    return 'opened'\n"
      "  except OSError as e:\n"
      "    return os.strerror(e.errno)\n"
      "print(os.path.exists('" + (host / "secret").string() + "'))\n"
      "print(attempt('" + (host / "ro" / "data").string() + "', 'r'))\n"
      "print(attempt('" + (host / "ro" / "new").string() + "'))\n"
      "print(attempt('" + (host / "rw" / "out").string() + "'))\n"
      "print(attempt('" + private_tmp + "'))\n"
      "print(attempt('/newfile'))\n"
      "print(attempt('/dev/newfile'))\n"
      "print(open_for_write('/proc/sys/kernel/core_pattern'))\n"
      "print(open_for_write('/proc/sys/kernel/core_uses_pid'))\n"
      "print(os.path.exists('/home'), os.path.exists('/etc/passwd'), os.path.exists('/root'))\n";
  SandboxPolicy policy = base_policy();
  policy.read_only.push_back((host / "ro").string());
  policy.writable = {(host / "rw").string()};
  const ProcessResult r = run_sandboxed(python(script), policy);
  CHECK(r.err == "");
  CHECK(r.out ==
        "False\n"
        "data\n"
        "Read-only file system\n"
        "wrote\n"
        "wrote\n"
        "Read-only file system\n"
        "Read-only file system\n"
        "Read-only file system\n"
        "Read-only file system\n"
        "False False False\n");
  CHECK(cudaagent::testing::read_file((host / "rw" / "out").string()) == "x");
  CHECK_FALSE(fs::exists(host / "ro" / "new"));
  CHECK_FALSE(fs::exists(private_tmp));
}

TEST_CASE("the command is PID 2 under bwrap's reaper, and setsid escapees die with the sandbox") {
  if (!sandbox_available()) return;
  TempDir dir;
  const fs::path out = fs::canonical(dir.path());
  const std::string token = "escapee-pid-ns-" + std::to_string(::getpid());
  SandboxPolicy policy = base_policy();
  policy.writable = {out.string()};
  const ProcessResult r = run_sandboxed(
      command({"/bin/sh", "-c", "echo $$ $PPID; " + escapee(out / "marker", token) + "sleep 0.3"}),
      policy);
  CHECK(r.outcome == Outcome::kExited);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "2 1\n");
  check_escapee_gone(out / "marker", token);
}

TEST_CASE("seccomp refuses ptrace, unshare, io_uring and namespace clones, clone3 is ENOSYS") {
  if (!sandbox_available()) return;
  // Raw system calls with numbers from this build's headers; the flags are chosen so that the
  // kernel itself would refuse each call harmlessly (EINVAL, EFAULT) if seccomp let it through.
  const std::string script =
      "import ctypes\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "def call(*args):\n"
      "  return 0 if libc.syscall(*args) == 0 else ctypes.get_errno()\n"
      "status = open('/proc/self/status').read()\n"
      "print([l.split()[1] for l in status.splitlines() if l.startswith('Seccomp:')][0],\n"
      "      call(" + std::to_string(SYS_unshare) + ", 0x10000000),\n"  // CLONE_NEWUSER
      "      call(" + std::to_string(SYS_clone3) + ", 0, 0),\n"
      "      call(" + std::to_string(SYS_io_uring_setup) + ", 1, 0),\n"
      // CLONE_NEWNET | CLONE_THREAD without CLONE_SIGHAND: EINVAL from the kernel.
      "      call(" + std::to_string(SYS_clone) + ", 0x40010000, 0, 0, 0, 0),\n"
      "      call(" + std::to_string(SYS_ptrace) + ", 0, 0, 0, 0))\n";  // PTRACE_TRACEME, last
  SandboxPolicy policy = base_policy();
  ProcessResult r = run_sandboxed(python(script), policy);
  CHECK(r.err == "");
  CHECK(r.out == "2 1 38 1 1 1\n");  // filtered; EPERM x2, ENOSYS, EPERM x3
  policy.seccomp = false;
  r = run_sandboxed(python(script), policy);
  CHECK(r.err == "");
  // The control: bwrap's --disable-userns (ENOSPC), then the kernel's own answers, and ptrace
  // succeeds.
  CHECK(r.out == "0 28 22 14 22 0\n");
}

TEST_CASE("inside, the environment is exactly the one given, and inherited descriptors arrive") {
  if (!sandbox_available()) return;
  ProcessSpec inner = command({"env"});  // found through the given PATH, inside
  inner.env = {"PATH=/usr/bin", "A=1", "B=two words", "EMPTY="};
  ProcessResult r = run_sandboxed(inner, base_policy());
  // bwrap always sets PWD to the directory it changed to; nothing else is added.
  CHECK(r.out == "PATH=/usr/bin\nA=1\nB=two words\nEMPTY=\nPWD=/\n");

  // A command run a second time finds its seccomp program consumed: bwrap refuses to start
  // rather than run the command unfiltered.
  auto once = cudaagent::sandbox_command(inner, base_policy(), probe());
  REQUIRE(once.is_ok());
  CHECK(cudaagent::run_process(once.value().spec).value().exit_code == 0);
  const ProcessResult again = cudaagent::run_process(once.value().spec).value();
  CHECK(again.exit_code == 1);
  CHECK(again.out == "");
  CHECK(again.err.find("bwrap: ") == 0);

  TempDir dir;  // not bound: the descriptor is the only way in
  cudaagent::testing::write_file(dir.file("handed"), "handed over");
  const int fd = ::open(dir.file("handed").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  inner = command({"/bin/cat", "/proc/self/fd/5"});
  inner.inherit_fds = {{fd, 5}};
  r = run_sandboxed(inner, base_policy());
  ::close(fd);
  CHECK(r.out == "handed over");
}

TEST_CASE("a timeout kills the whole sandbox, setsid escapees included") {
  if (!sandbox_available()) return;
  TempDir dir;
  const fs::path out = fs::canonical(dir.path());
  const std::string token = "escapee-timeout-" + std::to_string(::getpid());
  SandboxPolicy policy = base_policy();
  policy.writable = {out.string()};
  ProcessSpec inner =
      command({"/bin/sh", "-c", "trap '' TERM; " + escapee(out / "marker", token) + "sleep 30"});
  inner.timeout_seconds = 0.5;
  inner.kill_grace_seconds = 0.5;
  const ProcessResult r = run_sandboxed(inner, policy);
  CHECK(r.outcome == Outcome::kTimedOut);
  CHECK(r.wall_seconds < 3.0);
  check_escapee_gone(out / "marker", token);
}

TEST_CASE("as root, run_as runs the sandbox as an unprivileged uid") {
  if (!sandbox_available()) return;
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root");
    return;
  }
  TempDir dir;
  const fs::path out = fs::canonical(dir.path());
  fs::permissions(out, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::create_directories(out / "rw");
  REQUIRE(::chown((out / "rw").c_str(), 65534, 65534) == 0);
  SandboxPolicy policy = base_policy();
  policy.writable = {(out / "rw").string()};
  ProcessSpec inner = command({"/bin/sh", "-c", "id -u; echo x > " + (out / "rw" / "f").string()});
  inner.run_as = cudaagent::ProcessCredentials{65534, 65534};
  const ProcessResult r = run_sandboxed(inner, policy);
  CHECK(r.err == "");
  CHECK(r.out == "65534\n");
  struct stat st {};
  REQUIRE(::stat((out / "rw" / "f").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
}

TEST_CASE("Debian's python3 imports torch inside with the system paths alone") {
  if (!sandbox_available()) return;
  // find_spec, not an import: importing torch takes seconds.
  const auto outside = cudaagent::run_process(
      python("import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"));
  if (!outside || outside.value().exit_code != 0) {
    MESSAGE("skipped: no torch for " << kPython);
    return;
  }
  ProcessSpec inner = python(
      "import torch, tempfile\n"
      "print(torch.ones(3).sum().item(), tempfile.gettempdir())\n");
  inner.timeout_seconds = 60;
  const ProcessResult r = run_sandboxed(inner, base_policy());
  CHECK(r.err == "");
  CHECK(r.out == "3.0 /tmp\n");
}
