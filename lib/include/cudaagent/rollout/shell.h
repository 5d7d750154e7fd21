// The episode's shell: one persistent bash inside the OS sandbox (the Bash tool), plus background
// commands (Bash with run_in_background, read with BashOutput, stopped with KillBash).
//
// Key design choice: each command is written to a file the sandbox can read (never typed into the
// shell's input, so no quoting can break out), sourced by the persistent bash with its output sent
// to a log file the rollout process owns, and followed by a marker line carrying the exit code and
// working directory on the shell's own stdout. Output is read from the log afterwards with the
// middle cut when it is too long (a command's output never sits in memory whole), and the log is
// truncated for the next command. A command that outlives its timeout takes the shell with it: the
// sandbox is killed whole and a fresh shell starts in the same directory at the next command.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/rollout/workspace_files.h"
#include "cudaagent/sandbox/process.h"
#include "cudaagent/sandbox/runner.h"
#include "cudaagent/sandbox/subprocess.h"

namespace cudaagent::rollout {

struct ShellSettings {
  std::string workspace;                     // absolute host path: the shell's start directory, writable
  std::vector<std::string> protected_paths;  // absolute paths bound read-only over the workspace
  std::vector<std::string> readable;         // more read-only binds (the evaluation socket's folder)
  std::string scratch;                       // private host folder for command files and logs
  SandboxWrapper wrap;                       // empty: run unsandboxed (the user allowed it)
  std::vector<std::string> env;              // the shell's whole environment
  double default_timeout_seconds = 120;
  double max_timeout_seconds = 600;
  std::size_t output_cap_bytes = 30000;  // of a command's output shown to the model
  ProcessLimits limits;                  // for the shell and background commands
  int max_background = 8;                // background commands alive at once
  // Seconds the evaluator has spent on this episode so far: a command's clock stops while it
  // waits for an evaluation. Empty: no such pause.
  std::function<double()> paused_seconds;
};

class ShellSession {
 public:
  explicit ShellSession(ShellSettings settings);
  ~ShellSession();  // kills the shell and every background command (their sandboxes whole)
  ShellSession(const ShellSession&) = delete;
  ShellSession& operator=(const ShellSession&) = delete;

  // Runs `command` in the persistent shell; timeout_seconds <= 0 means the default, and more than
  // the maximum is the maximum. The output (stdout and stderr together, capped) and a line for a
  // non-zero exit code, a timeout or a shell that exited. `stop` (a signal number) ends the wait.
  ToolResult run(const std::string& command, double timeout_seconds, const std::atomic<int>& stop);

  // Starts `command` in the background, in the shell's current directory; the result names its id.
  ToolResult start_background(const std::string& command);
  // New output of background command `id` since the last call, and whether it is still running.
  // `filter`: only lines matching this regular expression (PCRE2), when not empty.
  ToolResult background_output(const std::string& id, const std::string& filter);
  ToolResult kill_background(const std::string& id);

  // The shell's working directory (inside the sandbox) after the last command.
  const std::string& cwd() const { return cwd_; }
  int commands_run() const { return commands_; }
  int shell_starts() const { return starts_; }

 private:
  struct Background;
  Status start_shell();
  Result<SandboxCommand> wrap(const ProcessSpec& spec) const;
  std::string take_output(const std::string& log_path, std::size_t cap);
  std::string write_command_file(const std::string& name, const std::string& command);

  ShellSettings settings_;
  std::optional<Subprocess> shell_;
  std::string shell_log_;
  std::string cwd_;
  int commands_ = 0;
  int starts_ = 0;
  int next_background_ = 1;
  std::map<std::string, std::unique_ptr<Background>> background_;
};

// The middle of `text` cut so that at most `cap` bytes remain, with a note of how much was cut.
std::string cut_middle(const std::string& text, std::size_t cap);

}  // namespace cudaagent::rollout
