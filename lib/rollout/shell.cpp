// The persistent shell and background commands. The marker that ends a command carries a random
// nonce, so output that merely looks like a marker cannot end a command early; a command that
// fakes one anyway (it would have to read the shell's input) only confuses its own episode.
#include "cudaagent/rollout/shell.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

#include "cudaagent/base/files.h"
#include "fd_walk.h"
#include "regex.h"

namespace cudaagent::rollout {
namespace {

using detail::Fd;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string random_hex() {
  std::random_device device;
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 4; ++i) {
    const unsigned value = device();
    for (int shift = 0; shift < 32; shift += 4) out.push_back(kHex[(value >> shift) & 0xF]);
  }
  return out;
}

std::string seconds_text(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.0f", seconds);
  return buffer;
}

// Reads [offset, offset + size) of `fd`.
std::string read_range(int fd, std::size_t offset, std::size_t size) {
  std::string out(size, '\0');
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, out.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

// Bytes [from, end) of the file, the middle cut to `cap` when longer.
std::string read_capped(int fd, std::size_t from, std::size_t end, std::size_t cap) {
  if (end <= from) return {};
  const std::size_t size = end - from;
  if (size <= cap) return read_range(fd, from, size);
  const std::size_t half = cap / 2;
  return read_range(fd, from, half) + "\n[... " + std::to_string(size - 2 * half) +
         " bytes of output cut from the middle ...]\n" + read_range(fd, end - half, half);
}

}  // namespace

std::string cut_middle(const std::string& text, std::size_t cap) {
  if (text.size() <= cap) return text;
  const std::size_t half = cap / 2;
  return text.substr(0, half) + "\n[... " + std::to_string(text.size() - 2 * half) +
         " bytes of output cut from the middle ...]\n" + text.substr(text.size() - half);
}

struct ShellSession::Background {
  std::string command;
  std::string log;
  std::optional<Subprocess> process;
  std::size_t offset = 0;
  std::optional<int> exit_code;
  bool killed = false;
};

ShellSession::ShellSession(ShellSettings settings)
    : settings_(std::move(settings)), cwd_(settings_.workspace) {
  (void)make_directories(settings_.scratch + "/cmd");
}

ShellSession::~ShellSession() {
  background_.clear();  // each Subprocess kills its sandbox
  shell_.reset();
}

Result<SandboxCommand> ShellSession::wrap(const ProcessSpec& spec) const {
  if (!settings_.wrap) {
    SandboxCommand plain;
    plain.spec = spec;
    return plain;
  }
  std::vector<std::string> readable = settings_.protected_paths;
  readable.insert(readable.end(), settings_.readable.begin(), settings_.readable.end());
  readable.push_back(settings_.scratch + "/cmd");
  return settings_.wrap(spec, readable, {settings_.workspace});
}

std::string ShellSession::write_command_file(const std::string& name, const std::string& command) {
  const std::string path = settings_.scratch + "/cmd/" + name + ".sh";
  (void)write_file_atomically(path, command + "\n");
  ::chmod(path.c_str(), 0644);
  return path;
}

Status ShellSession::start_shell() {
  shell_log_ = settings_.scratch + "/shell.log";
  ::unlink(shell_log_.c_str());
  std::error_code error;
  if (!std::filesystem::is_directory(cwd_, error)) cwd_ = settings_.workspace;
  ProcessSpec spec;
  spec.argv = {"/bin/bash", "--noprofile", "--norc"};
  spec.env = settings_.env;
  spec.working_dir = cwd_;
  spec.limits = settings_.limits;
  auto command = wrap(spec);
  if (!command) return command.status();
  auto shell = Subprocess::spawn(command.value().spec, shell_log_);
  if (!shell) return shell.status();
  shell_.emplace(std::move(shell).value());
  ++starts_;
  return Status::ok();
}

std::string ShellSession::take_output(const std::string& log_path, std::size_t cap) {
  Fd fd(::open(log_path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return {};
  std::string out = read_capped(fd.get(), 0, static_cast<std::size_t>(st.st_size), cap);
  // The shell appends (O_APPEND), so its next output starts at 0 again.
  (void)!::ftruncate(fd.get(), 0);
  return out;
}

ToolResult ShellSession::run(const std::string& command, double timeout_seconds,
                             const std::atomic<int>& stop) {
  if (command.find_first_not_of(" \t\r\n") == std::string::npos) return ToolResult::fail("command is empty");
  if (!shell_) {
    if (auto started = start_shell(); !started) {
      return ToolResult::fail("cannot start the shell: " + started.message());
    }
  }
  double timeout = timeout_seconds > 0 ? timeout_seconds : settings_.default_timeout_seconds;
  timeout = std::min(timeout, settings_.max_timeout_seconds);
  ++commands_;
  const std::string marker = "__cudaagent_done_" + random_hex();
  const std::string file = write_command_file("c" + std::to_string(commands_), command);
  const std::string line =
      "{ . '" + file + "'\n} </dev/null >&2; printf '%s %d %s\\n' '" + marker + "' \"$?\" \"$PWD\"\n";
  const double started = steady_seconds();
  const double paused_at_start = settings_.paused_seconds ? settings_.paused_seconds() : 0.0;
  if (auto sent = shell_->send(line, 10.0); !sent) {
    const std::string output = take_output(shell_log_, settings_.output_cap_bytes);
    shell_.reset();
    return ToolResult::fail(output + "[the shell is gone (" + sent.message() +
                            "); a new one starts at the next command, in " + cwd_ + "]");
  }
  for (;;) {
    if (stop.load() != 0) {
      shell_.reset();
      return ToolResult::fail("[stopped: the rollout is shutting down]");
    }
    const double paused = settings_.paused_seconds ? settings_.paused_seconds() - paused_at_start : 0.0;
    const double left = started + timeout + paused - steady_seconds();
    if (left <= 0) {
      shell_.reset();  // kills the sandbox and everything the command started
      std::string output = take_output(shell_log_, settings_.output_cap_bytes);
      return ToolResult::fail(output + (output.empty() || output.back() == '\n' ? "" : "\n") +
                              "[the command timed out after " + seconds_text(timeout) +
                              " s: the shell was killed with everything it started; a new shell starts "
                              "at the next command, in " +
                              cwd_ +
                              " (shell variables and functions are gone). Use run_in_background for long "
                              "commands]");
    }
    auto received = shell_->receive_line(std::min(left, 0.25), 1 << 16);
    if (!received || received.value().kind == Subprocess::Line::Kind::kClosed ||
        received.value().kind == Subprocess::Line::Kind::kTooLong) {
      auto ended = shell_->finish(1.0);
      shell_.reset();
      std::string output = take_output(shell_log_, settings_.output_cap_bytes);
      const std::string how = ended && ended->outcome == ProcessResult::Outcome::kExited
                                  ? "with code " + std::to_string(ended->exit_code)
                                  : "";
      return ToolResult::fail(output + (output.empty() || output.back() == '\n' ? "" : "\n") +
                              "[the shell exited " + how + "; a new shell starts at the next command, in " +
                              cwd_ + "]");
    }
    if (received.value().kind != Subprocess::Line::Kind::kLine) continue;
    const std::string& text = received.value().text;
    if (text.rfind(marker + " ", 0) != 0) continue;
    const std::string rest = text.substr(marker.size() + 1);
    const std::size_t space = rest.find(' ');
    const int exit_code = std::atoi(rest.substr(0, space).c_str());
    if (space != std::string::npos) cwd_ = rest.substr(space + 1);
    std::string output = take_output(shell_log_, settings_.output_cap_bytes);
    if (exit_code != 0) {
      output += (output.empty() || output.back() == '\n' ? "" : "\n") + std::string("[exit code ") +
                std::to_string(exit_code) + "]";
      return ToolResult::fail(std::move(output));
    }
    if (output.empty()) output = "(no output)";
    return ToolResult::ok(std::move(output));
  }
}

ToolResult ShellSession::start_background(const std::string& command) {
  if (command.find_first_not_of(" \t\r\n") == std::string::npos) return ToolResult::fail("command is empty");
  int running = 0;
  for (auto& [id, job] : background_) running += job->process && job->process->running() ? 1 : 0;
  if (running >= settings_.max_background) {
    return ToolResult::fail("already " + std::to_string(running) +
                            " background commands running: wait for one or stop it with KillBash");
  }
  const std::string id = "bash_" + std::to_string(next_background_++);
  auto job = std::make_unique<Background>();
  job->command = command;
  job->log = settings_.scratch + "/" + id + ".log";
  const std::string file = write_command_file(id, command);
  ProcessSpec spec;
  spec.argv = {"/bin/bash", "--noprofile", "--norc", "-c", "exec </dev/null 1>&2; . '" + file + "'"};
  spec.env = settings_.env;
  std::error_code error;
  spec.working_dir = std::filesystem::is_directory(cwd_, error) ? cwd_ : settings_.workspace;
  spec.limits = settings_.limits;
  auto wrapped = wrap(spec);
  if (!wrapped) return ToolResult::fail("cannot start the command: " + wrapped.status().message());
  auto process = Subprocess::spawn(wrapped.value().spec, job->log);
  if (!process) return ToolResult::fail("cannot start the command: " + process.status().message());
  job->process.emplace(std::move(process).value());
  background_[id] = std::move(job);
  return ToolResult::ok("Started background command " + id + " in " + spec.working_dir +
                        ". Read its output with BashOutput(bash_id=\"" + id +
                        "\"), stop it with KillBash(shell_id=\"" + id + "\").");
}

ToolResult ShellSession::background_output(const std::string& id, const std::string& filter) {
  const auto found = background_.find(id);
  if (found == background_.end()) {
    std::string known;
    for (const auto& [name, job] : background_) known += (known.empty() ? "" : ", ") + name;
    return ToolResult::fail("no background command '" + id + "'" +
                            (known.empty() ? "" : " (there are: " + known + ")"));
  }
  Background& job = *found->second;
  std::optional<detail::Regex> regex;
  if (!filter.empty()) {
    auto compiled = detail::Regex::compile(filter, false);
    if (!compiled) return ToolResult::fail(compiled.status().message());
    regex.emplace(std::move(compiled).value());
  }
  const bool running = job.process && job.process->running();
  if (!running && job.process && !job.exit_code && !job.killed) {
    auto ended = job.process->finish(0.5);
    job.exit_code = ended && ended->outcome == ProcessResult::Outcome::kExited ? ended->exit_code : -1;
  }
  std::string text;
  Fd fd(::open(job.log.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd) {
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0 && static_cast<std::size_t>(st.st_size) > job.offset) {
      const std::size_t end = static_cast<std::size_t>(st.st_size);
      text = read_capped(fd.get(), job.offset, end, settings_.output_cap_bytes);
      job.offset = end;
    }
  }
  if (regex) {
    std::string kept;
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string_view line(text.data() + start, end - start);
      if (regex->search(line) == detail::Regex::Match::kYes) kept.append(line).append("\n");
      start = end + 1;
    }
    text = std::move(kept);
  }
  if (text.empty()) text = "(no new output)\n";
  if (text.back() != '\n') text += '\n';
  if (job.killed) {
    text += "[status: killed]";
  } else if (running) {
    text += "[status: running]";
  } else {
    text += "[status: exited with code " + std::to_string(job.exit_code.value_or(-1)) + "]";
  }
  return ToolResult::ok(std::move(text));
}

ToolResult ShellSession::kill_background(const std::string& id) {
  const auto found = background_.find(id);
  if (found == background_.end()) return ToolResult::fail("no background command '" + id + "'");
  Background& job = *found->second;
  if (!job.process || !job.process->running()) {
    return ToolResult::ok(id + " had already ended");
  }
  job.process->kill();
  job.killed = true;
  return ToolResult::ok("Killed " + id);
}

}  // namespace cudaagent::rollout
