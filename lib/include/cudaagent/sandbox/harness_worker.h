// A warm harness worker (share/harness/worker.py): one Python process that has imported torch
// and runs each job — a harness script with its arguments — in a fresh forked child. The verifier
// keeps one for the reference and one for candidates, each in its own OS sandbox, so a candidate
// costs a fork instead of an interpreter start and a torch import (cudaagent(7), SANDBOX).
//
// Key design choice: a job that hangs, or a worker that dies or answers nonsense, costs only that
// job: the worker is killed (its whole sandbox with it) and the next job starts a fresh one. The
// worker's answer only says how the child ended; verdicts come from files the trusted side reads.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/sandbox/process.h"
#include "cudaagent/sandbox/sandbox.h"
#include "cudaagent/sandbox/subprocess.h"

namespace cudaagent {

struct HarnessWorkerOptions {
  // python -I -B <share>/harness/worker.py --preload=torch, with its environment and limits.
  ProcessSpec process;
  // Turns `process` into the command that runs it in the OS sandbox; empty: run it as it is.
  std::function<Result<SandboxCommand>(const ProcessSpec&)> wrap;
  std::string log_path;               // the worker's own stderr (appended)
  double start_timeout_seconds = 300;  // interpreter start plus the preloads
  // A stop request to honour (Session::stop_signal; null: none; when null, the `stop` of the
  // command `wrap` returns is honoured instead). Once it is non-zero, a job, a session or a start
  // that is waiting ends within kStopPollSeconds: the worker is killed with everything in its
  // sandbox, and the call returns stopped_status() — never a result, since a job cut short has
  // no outcome to judge.
  const std::atomic<int>* stop = nullptr;
};

struct HarnessJob {
  std::string script;               // a harness script, run as __main__ in the child
  std::vector<std::string> args;    // its sys.argv[1:]
  std::string stdin_data;           // at most 60000 bytes (a seed, a small request)
  std::string working_dir;
  double timeout_seconds = 60;      // from the request until the answer
  ProcessLimits limits;             // applied in the child: cpu, address space, file size
  std::vector<int> cpus;            // the child's CPU affinity (sched_setaffinity); empty: inherited
  std::size_t output_cap = std::size_t{1} << 20;  // child's stdout+stderr kept
  // Emptied by the worker once the job and everything it started have ended: the sandbox's private
  // /tmp and /dev/shm, so the next job starts from fresh, empty writable space. Never set this for
  // a worker that runs outside a sandbox (it would empty the host's directories).
  std::vector<std::string> scrub_dirs;
};

class HarnessWorker;

// An interactive job: the child runs while the driver exchanges lines with it through the worker
// (worker.py relays them, wrapped in its own JSON, so the child cannot speak for the worker). How
// cudaagent-profile keeps a timing process loaded between rounds. Made by
// HarnessWorker::open_session; the worker takes no other job while a session is open. Move-only;
// destroying a session that has not ended kills the worker, and the child with it.
class HarnessSession {
 public:
  struct Message {
    enum class Kind {
      kLine,     // `text`: one line the child wrote on its reply descriptor (fd 3)
      kEnded,    // the child ended: `result` says how (as HarnessWorker::run)
      kTimeout,  // nothing within the time given; the session is still open
    };
    Kind kind = Kind::kTimeout;
    std::string text;
    ProcessResult result;
  };

  HarnessSession(HarnessSession&& other) noexcept;
  HarnessSession& operator=(HarnessSession&& other) noexcept;
  HarnessSession(const HarnessSession&) = delete;
  HarnessSession& operator=(const HarnessSession&) = delete;
  ~HarnessSession();

  // Sends one line (no '\n' inside) to the child's stdin. A failed Status when the worker is gone.
  Status send(std::string_view line, double timeout_seconds = 10);
  // The next line of the child, its end, or a timeout. A Status (the worker is then killed) when
  // the worker died or answered something that is not this session's.
  Result<Message> receive(double timeout_seconds);
  // Closes the child's stdin and waits for its end, dropping lines it still writes. On timeout the
  // worker is killed and the result says kTimedOut.
  Result<ProcessResult> close(double timeout_seconds);
  // Kills the worker (and the child). Idempotent.
  void abort();
  bool ended() const { return worker_ == nullptr; }

 private:
  friend class HarnessWorker;
  HarnessSession(HarnessWorker* worker, std::string nonce, double started);
  HarnessWorker* worker_ = nullptr;  // null once ended
  std::string nonce_;
  double started_ = 0;               // steady seconds, for the kill result
};

class HarnessWorker {
 public:
  explicit HarnessWorker(HarnessWorkerOptions options)
      : options_(std::move(options)), stop_(options_.stop) {}

  // Runs one job and says how its child ended, as run_process would: kExited / kSignaled with the
  // merged output in `err` (truncated flagged), kTimedOut when the time ran out (the worker is then
  // killed), kSignaled with SIGKILL when the worker itself died mid-job. A Status when the worker
  // cannot be started at all (with the tail of its log), or answers in a way that cannot be ours.
  Result<ProcessResult> run(const HarnessJob& job);

  // Starts `job` as an interactive session (job.stdin_data and job.timeout_seconds are not used:
  // the lines go through the session, each with its own deadline). A Status when the worker
  // cannot be started.
  Result<HarnessSession> open_session(const HarnessJob& job);

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
  friend class HarnessSession;
  std::string request_json(const HarnessJob& job, const std::string& nonce, bool interactive) const;
  bool stopping() const { return stop_ != nullptr && stop_->load() != 0; }
  Status stop_here() {   // kills the worker; the Status a stopped call returns
    process_.reset();
    return stopped_status(stop_->load());
  }
  Status start();        // launch() and wait for the greeting
  Status await_ready();  // read the greeting of the launched worker
  HarnessWorkerOptions options_;
  const std::atomic<int>* stop_;  // options_.stop, else the wrapped command's (set at launch)
  std::optional<Subprocess> process_;
  bool ready_ = false;
  std::map<std::string, std::string> versions_;
  int starts_ = 0;
};

}  // namespace cudaagent
