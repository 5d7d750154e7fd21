// How a stage runs untrusted Python (and compilers) under the OS sandbox: the decision every such
// stage makes once at start (probe; refuse below the minimum unless the user allowed it), and the
// read-only paths a torch interpreter and the GPU need inside. Shared by verify and filter.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cudaagent/base/session.h"
#include "cudaagent/base/status.h"
#include "cudaagent/sandbox/harness_worker.h"
#include "cudaagent/sandbox/process.h"
#include "cudaagent/sandbox/sandbox.h"
#include "cudaagent/sandbox/torch_env.h"

namespace cudaagent {

// Wraps one process in the sandbox: the command it returns may read `readable` (besides what the
// wrapper binds for everyone) and write only `writable`; the caller spawns it (run_process,
// Subprocess, HarnessWorker). A Status when the sandbox could not be built.
using SandboxWrapper = std::function<Result<SandboxCommand>(
    const ProcessSpec& spec, const std::vector<std::string>& readable,
    const std::vector<std::string>& writable)>;

struct SandboxRequest {
  std::string bwrap = "bwrap";
  bool allow_unsandboxed = false;  // run even when the probe is below the minimum
  bool no_sandbox = false;         // do not even try (needs allow_unsandboxed)
  // Bound read-only for every process: torch_runtime_paths() and the harness, typically.
  std::vector<std::string> read_only;
  bool gpu = false;                    // bind the GPU device nodes and /sys
};

struct SandboxChoice {
  SandboxWrapper wrap;  // empty: processes run unsandboxed (the user allowed it)
  std::string summary;  // for logs and records: the probe's summary, or why there is none
};

// `wrap` with every command it returns honouring `stop` (ProcessSpec::stop): how a stage hands a
// stop request to all the sandboxed processes of code it does not own (verify's and profile's
// workers and compilers). Empty stays empty: unsandboxed processes are not covered.
SandboxWrapper honour_stop(SandboxWrapper wrap, const std::atomic<int>* stop);

// Probes the sandbox (unless no_sandbox) and returns the runner. A Status, with the probe's notes
// and the flag that would override it, when the sandbox is below the minimum and unsandboxed
// runs were not allowed, or when no_sandbox was asked without allow_unsandboxed. Logs a warning
// on `log` when it lets code run without the sandbox. The wrapper is thread-safe.
Result<SandboxChoice> choose_sandbox(const SandboxRequest& request, Logger& log);

// The read-only paths a sandboxed torch interpreter and the compilers need besides the system:
// sandbox_system_paths(), the interpreter's prefixes, torch's site-packages and libraries,
// /usr/local/cuda, and the installations nvcc and g++ are found in (PATH, then
// /usr/local/cuda/bin). Sorted, without duplicates.
std::vector<std::string> torch_runtime_paths(const TorchEnv& torch);

// The fixed environment of every harness Python (nothing of the caller's leaks in): PATH, HOME =
// `home` (torch.compile's and Triton's caches need a writable home, and nothing else is
// writable), LC_ALL, OMP_NUM_THREADS=1, and USER/LOGNAME (the sandbox has no /etc/passwd, and
// torch asks getpass.getuser() for its cache paths). CUDA_VISIBLE_DEVICES is the caller's to add.
std::vector<std::string> harness_environment(const std::string& home);

// The warm harness worker each stage keeps (verify's reference and candidate workers, profile's,
// filter's): `python -I -B <harness_dir>/worker.py --preload=torch` with `env`, the file-size and
// open-files limits every stage uses, its stderr appended to `log_path`, and in the sandbox (when
// `wrap` is set) able to read `readable` and write only `writable`.
// With `stop` (Session::stop_signal), a job or start of the worker ends within a fraction of a
// second of a stop request, the worker killed with its sandbox (HarnessWorkerOptions::stop).
// `warm_modules` are imported too before any job forks, where they exist (worker.py
// --preload-optional): filter's torch.compile stack, which each forked job would import again.
struct HarnessWorkerPlan {
  std::string python, harness_dir, log_path;
  std::vector<std::string> env, readable, writable;
  std::vector<std::string> warm_modules;
  std::optional<ProcessCredentials> run_as;
  SandboxWrapper wrap;
  const std::atomic<int>* stop = nullptr;
};
std::unique_ptr<HarnessWorker> make_harness_worker(const HarnessWorkerPlan& plan);

// A build runner (BuildOptions::runner) that runs each compiler in the sandbox, writing only the
// workspace being built and the object cache. With `stop` (Session::stop_signal), a compiler that
// is running when a stop is requested is killed with its process group and the runner returns
// stopped_status() (ProcessSpec::stop).
std::function<Result<ProcessResult>(const ProcessSpec&)> sandboxed_build_runner(
    const SandboxWrapper& wrap, const std::string& work, const std::string& cache,
    const std::atomic<int>* stop = nullptr);

// The GPU device nodes (/dev/nvidia*, not directories), for SandboxPolicy::devices.
std::vector<std::string> gpu_device_nodes();

}  // namespace cudaagent
