// A warm harness worker (share/harness/worker.py): one Python process that has imported torch
// and runs each job — a harness script with its arguments — in a fresh forked child. The verifier
// keeps one for the reference and one for candidates, each in its own OS sandbox, so a candidate
// costs a fork instead of an interpreter start and a torch import (DESIGN.md §4).
//
// Key design choice: a job that hangs, or a worker that dies or answers nonsense, costs only that
// job: the worker is killed (its whole sandbox with it) and the next job starts a fresh one. The
// worker's answer only says how the child ended; verdicts come from files the trusted side reads.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/process.h"
#include "cudaagent/sandbox.h"
#include "cudaagent/status.h"
#include "cudaagent/subprocess.h"

namespace cudaagent {

struct HarnessWorkerOptions {
  // python -I -B <share>/harness/worker.py --preload=torch, with its environment and limits.
  ProcessSpec process;
  // Turns `process` into the command that runs it in the OS sandbox; empty: run it as it is.
  std::function<Result<SandboxCommand>(const ProcessSpec&)> wrap;
  std::string log_path;               // the worker's own stderr (appended)
  double start_timeout_seconds = 300;  // interpreter start plus the preloads
};

struct HarnessJob {
  std::string script;               // a harness script, run as __main__ in the child
  std::vector<std::string> args;    // its sys.argv[1:]
  std::string stdin_data;           // at most 60000 bytes (a seed, a small request)
  std::string working_dir;
  double timeout_seconds = 60;      // from the request until the answer
  ProcessLimits limits;             // applied in the child: cpu, address space, file size
  std::size_t output_cap = std::size_t{1} << 20;  // child's stdout+stderr kept
};

class HarnessWorker {
 public:
  explicit HarnessWorker(HarnessWorkerOptions options) : options_(std::move(options)) {}

  // Runs one job and says how its child ended, as run_process would: kExited / kSignaled with the
  // merged output in `err` (truncated flagged), kTimedOut when the time ran out (the worker is then
  // killed), kSignaled with SIGKILL when the worker itself died mid-job. A Status when the worker
  // cannot be started at all (with the tail of its log), or answers in a way that cannot be ours.
  Result<ProcessResult> run(const HarnessJob& job);

  // Starts the worker process without waiting for it to be ready, so its interpreter start and
  // imports overlap other work (the build); run() and warm_up() then wait for its greeting.
  Status launch();

  // Starts the worker (or waits for the one launched) so its start is not charged to a job.
  // Seconds spent here; 0 when it was already ready.
  Result<double> warm_up();

  // Versions the worker reported at start ("torch" -> "2.11.0"); empty before a start.
  const std::map<std::string, std::string>& versions() const { return versions_; }

  // How many workers were started so far (a fresh one after every crash or timeout).
  int starts() const { return starts_; }

  void stop() { process_.reset(); }

 private:
  Status start();        // launch() and wait for the greeting
  Status await_ready();  // read the greeting of the launched worker
  HarnessWorkerOptions options_;
  std::optional<Subprocess> process_;
  bool ready_ = false;
  std::map<std::string, std::string> versions_;
  int starts_ = 0;
};

}  // namespace cudaagent
