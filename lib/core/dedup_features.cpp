// The AST helper process. It is spawned through run_process's own child set-up (process_child.h:
// its own process group, reset signals, closed descriptors, rlimits, death with its parent), but
// stays alive: requests and answers are lines on one socketpair (the child's stdin and stdout), so
// a closed peer is EPIPE from send(MSG_NOSIGNAL), never a SIGPIPE. The helper's stderr goes to a
// memfd whose last line explains a death.
#include "cudaagent/dedup_features.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <system_error>
#include <thread>

#include "cudaagent/json_writer.h"
#include "cudaagent/paths.h"
#include "cudaagent/session.h"
#include "cudaagent/torch_env.h"
#include "process_child.h"
#include "unique_fd.h"

extern char** environ;

namespace cudaagent {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr std::size_t kChunk = 64 * 1024;
// The helper holds one parsed module at a time; a hostile source may ask for much more.
constexpr std::uint64_t kAddressSpaceBytes = std::uint64_t{8} << 30;
constexpr std::uint64_t kStderrBytes = std::uint64_t{1} << 20;
constexpr double kStartSeconds = 30.0;
constexpr int kExitGraceSteps = 50;  // of 10 ms

std::string errno_text(int err) { return std::system_category().message(err); }

// Descriptors at 0-2 would be clobbered by the child's dup2 onto its stdio.
Status lift_above_stdio(UniqueFd& fd) {
  if (fd.get() > 2) return Status::ok();
  const int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return Status::error("cannot move a descriptor: " + errno_text(errno));
  fd.reset(moved);
  return Status::ok();
}

int remaining_ms(SteadyClock::time_point deadline) {
  const auto left = std::chrono::duration<double, std::milli>(deadline - SteadyClock::now());
  if (left.count() <= 0) return 0;
  return left.count() >= double{INT_MAX} ? INT_MAX : static_cast<int>(std::ceil(left.count()));
}

}  // namespace

struct AstTokenizer::State {
  std::string python;
  pid_t pid = -1;
  UniqueFd socket;       // our end; the child's stdin and stdout are the other
  UniqueFd stderr_file;  // memfd holding the child's stderr
  UniqueFd exec_errors;  // read end of the child's set-up error pipe
  double timeout_seconds = 60.0;
  std::string buffer;  // bytes received past the last answer
  bool failed = false;
  simdjson::dom::parser parser;

  ~State() { stop(); }

  void stop() {
    if (pid <= 0) return;
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
  }

  // Why the helper is gone or misbehaving, for messages: its exit, its last stderr line.
  std::string autopsy(const std::string& what) {
    std::string text = what;
    if (pid > 0) {
      // A helper that is exiting (it closed the socket first) gets a moment to finish, so its
      // own exit code, not our SIGKILL, is what the message reports.
      // WNOWAIT: the leader stays unreaped, so its pid (the group's id) cannot be reused
      // before the group is killed.
      bool exited = false;
      for (int i = 0; i < kExitGraceSteps && !exited; ++i) {
        siginfo_t info{};
        exited = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                 info.si_pid == pid;
        if (!exited) ::usleep(10'000);
      }
      ::kill(-pid, SIGKILL);
      if (!exited) ::kill(pid, SIGKILL);
      int status = 0;
      pid_t reaped = 0;
      while ((reaped = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
      }
      pid = -1;
      process_detail::ChildError report;
      if (::read(exec_errors.get(), &report, sizeof report) ==
          static_cast<ssize_t>(sizeof report)) {
        return text + ": cannot execute " + cudaagent::quoted(python) + ": " +
               errno_text(report.err);
      }
      if (reaped > 0 && WIFEXITED(status)) {
        text += " (exited with code " + std::to_string(WEXITSTATUS(status)) + ")";
      }
      if (reaped > 0 && WIFSIGNALED(status)) {
        text += " (killed by signal " + std::to_string(WTERMSIG(status)) + ")";
      }
    }
    std::string err(4096, '\0');
    const off_t size = ::lseek(stderr_file.get(), 0, SEEK_END);
    const off_t from = std::max<off_t>(0, size - static_cast<off_t>(err.size()));
    const ssize_t n = size > 0 ? ::pread(stderr_file.get(), err.data(), err.size(), from) : 0;
    err.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    if (const auto cut = err.rfind('\n'); cut != std::string::npos) err.erase(0, cut + 1);
    if (!err.empty()) text += ": " + err;
    failed = true;
    return text;
  }

  Status send_all(std::string_view bytes, SteadyClock::time_point deadline) {
    while (!bytes.empty()) {
      pollfd fd{socket.get(), POLLOUT, 0};
      const int ready = ::poll(&fd, 1, remaining_ms(deadline));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) return Status::error(autopsy("the AST helper stopped reading (timed out)"));
      const ssize_t n =
          ::send(socket.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) return Status::error(autopsy("the AST helper went away"));
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return Status::ok();
  }

  // The next '\n'-terminated line (without the '\n'), waiting until `deadline`.
  Result<std::string> receive_line(SteadyClock::time_point deadline, std::size_t cap) {
    std::size_t scanned = 0;
    for (;;) {
      if (const auto end = buffer.find('\n', scanned); end != std::string::npos) {
        std::string line = buffer.substr(0, end);
        buffer.erase(0, end + 1);
        return line;
      }
      scanned = buffer.size();
      if (buffer.size() > cap) {
        return Status::error(
            autopsy("the AST helper's answer exceeds " + std::to_string(cap) + " bytes"));
      }
      pollfd fd{socket.get(), POLLIN, 0};
      const int ready = ::poll(&fd, 1, remaining_ms(deadline));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        char limit[32];
        std::snprintf(limit, sizeof limit, "%g", timeout_seconds);
        return Status::error(
            autopsy(std::string("the AST helper did not answer within ") + limit + " s"));
      }
      const std::size_t old = buffer.size();
      buffer.resize(old + kChunk);
      const ssize_t n = ::recv(socket.get(), buffer.data() + old, kChunk, MSG_DONTWAIT);
      buffer.resize(old + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return Status::error(autopsy("the AST helper ended"));
    }
  }
};

AstTokenizer::AstTokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
AstTokenizer::AstTokenizer(AstTokenizer&&) noexcept = default;
AstTokenizer& AstTokenizer::operator=(AstTokenizer&&) noexcept = default;
AstTokenizer::~AstTokenizer() = default;

const std::string& AstTokenizer::python() const { return state_->python; }

Result<AstTokenizer> AstTokenizer::start(const std::string& python, const std::string& script,
                                         double timeout_seconds) {
  auto state = std::make_unique<State>();
  state->python = python;
  state->timeout_seconds = timeout_seconds;

  ProcessSpec spec;
  spec.argv = {python, "-I", script};
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    spec.env.emplace_back(*entry);
  }
  spec.limits.address_space_bytes = kAddressSpaceBytes;
  spec.limits.file_size_bytes = kStderrBytes;
  auto planned = process_detail::make_plan(spec);
  if (!planned) return planned.status();
  process_detail::ChildPlan& plan = planned.value();
  if (plan.exec_paths.empty()) {
    return Status::error("cannot execute " + cudaagent::quoted(python) + ": not found in PATH");
  }

  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return Status::error("cannot create a socket pair: " + errno_text(errno));
  }
  state->socket.reset(pair[0]);
  UniqueFd child_end(pair[1]);
  state->stderr_file.reset(::memfd_create("cudaagent-ast-stderr", MFD_CLOEXEC));
  if (!state->stderr_file.is_open()) {
    return Status::error("cannot create a memory file: " + errno_text(errno));
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    return Status::error("cannot create a pipe: " + errno_text(errno));
  state->exec_errors.reset(pipe_fds[0]);
  UniqueFd error_write(pipe_fds[1]);
  for (UniqueFd* fd :
       {&state->socket, &child_end, &state->stderr_file, &state->exec_errors, &error_write}) {
    if (Status lifted = lift_above_stdio(*fd); !lifted) return lifted;
  }
  plan.stdin_fd = child_end.get();
  plan.stdout_fd = child_end.get();
  plan.stderr_fd = state->stderr_file.get();
  plan.error_fd = error_write.get();

  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = ::fork();
  if (pid == 0) process_detail::child_main(plan);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return Status::error("cannot fork: " + errno_text(fork_errno));
  state->pid = pid;
  ::setpgid(pid, pid);  // as the child does; whichever runs first, the group exists
  child_end.reset();
  error_write.reset();
  ::fcntl(state->exec_errors.get(), F_SETFL, O_NONBLOCK);

  // Start-up gets at least kStartSeconds: an interpreter on a loaded node or a network
  // filesystem can take seconds to import, and that says nothing about the parses to come.
  const auto deadline =
      SteadyClock::now() +
      std::chrono::duration_cast<SteadyClock::duration>(
          std::chrono::duration<double>(std::max(timeout_seconds, kStartSeconds)));
  auto line = state->receive_line(deadline, 4096);
  if (!line) {
    return Status::error(cudaagent::quoted(python) +
                         " cannot run the AST helper: " + line.status().message());
  }
  simdjson::dom::element answer;
  std::string_view version;
  if (state->parser.parse(line.value()).get(answer) || answer["version"].get(version)) {
    return Status::error(
        cudaagent::quoted(python) + " cannot run the AST helper: " +
        state->autopsy("it announced " + cudaagent::quoted(line.value().substr(0, 200))));
  }
  if (version != kAstTokensVersion) {
    return Status::error(cudaagent::quoted(script) + " speaks " + cudaagent::quoted(version) +
                         ", expected " + cudaagent::quoted(kAstTokensVersion) +
                         " (a share directory from another version?)");
  }
  return AstTokenizer(std::move(state));
}

Result<ParsedSource> AstTokenizer::parse(std::string_view source) {
  State& state = *state_;
  if (state.failed) return Status::error("the AST helper has already failed");
  std::string request;
  request.reserve(source.size() + 16);
  append_json_string(request, source);
  request.push_back('\n');
  const auto deadline =
      SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                               std::chrono::duration<double>(state.timeout_seconds));
  if (Status sent = state.send_all(request, deadline); !sent) return sent;
  // Tokens are at most a few times longer than their text ("a+b" is "BinOp Name Add Name").
  auto line = state.receive_line(deadline, 16 * source.size() + (std::size_t{1} << 20));
  if (!line) return line.status();
  simdjson::dom::object answer;
  ParsedSource parsed;
  std::string_view text;
  if (state.parser.parse(line.value()).get(answer)) {
    return Status::error(
        state.autopsy("the AST helper answered " + cudaagent::quoted(line.value().substr(0, 200))));
  }
  std::string_view ops;
  if (!answer["tokens"].get(text) && !answer["ops"].get(ops)) {
    parsed.parsed = true;
    parsed.tokens = std::string(text);
    parsed.ops = std::string(ops);
  } else if (!answer["error"].get(text)) {
    parsed.error = std::string(text);
  } else {
    return Status::error(
        state.autopsy("the AST helper answered " + cudaagent::quoted(line.value().substr(0, 200))));
  }
  return parsed;
}

std::vector<std::optional<Result<ParsedSource>>> parse_sources(
    const std::string& python, const std::string& script,
    const std::vector<std::string_view>& sources, int helpers, std::uint64_t& restarts,
    const std::atomic<int>* stop) {
  std::vector<std::optional<Result<ParsedSource>>> answers(sources.size());
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> failures{0};
  // Each thread owns one helper; a source goes to whichever thread is free, so a slow task
  // holds up one helper, not the others.
  auto work = [&] {
    auto helper = AstTokenizer::start(python, script);
    while (helper && (stop == nullptr || stop->load() == 0)) {
      const std::size_t i = next.fetch_add(1);
      if (i >= sources.size()) break;
      auto answer = helper.value().parse(sources[i]);
      const bool failed = !answer;
      answers[i].emplace(std::move(answer));
      if (failed) {
        ++failures;
        helper = AstTokenizer::start(python, script);
      }
    }
  };
  const std::size_t threads = std::min<std::size_t>(std::max(helpers, 1), sources.size());
  std::vector<std::thread> workers;
  for (std::size_t i = 1; i < threads; ++i) workers.emplace_back(work);
  if (threads > 0) work();
  for (std::thread& worker : workers) worker.join();
  restarts += failures.load();
  return answers;
}

Result<AstTokenizer> start_ast_tokenizer(const std::string& requested) {
  const std::string script = share_dir() + "/harness/ast_features.py";
  std::string reasons;
  for (const std::string& python : python_candidates(requested)) {
    auto started = AstTokenizer::start(python, script);
    if (started) return started;
    reasons += (reasons.empty() ? "" : "; ") + started.status().message();
  }
  return Status::error("no Python can run the AST helper: " + reasons);
}

}  // namespace cudaagent
