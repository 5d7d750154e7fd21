// The sandbox as the tools that run untrusted Python use it (cudaagent-verify, cudaagent-profile):
// probe once, refuse below the minimum unless told otherwise, and build the hook that wraps each
// harness process with the system, torch, toolkit and GPU paths plus the job's own directories.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cudaagent/sandbox.h"
#include "cudaagent/session.h"
#include "cudaagent/status.h"
#include "cudaagent/torch_env.h"

namespace cudaagent {

// Wraps a process so that it may read `readable` (besides the system, torch and the harness) and
// write only `writable`.
using SandboxHook = std::function<Result<SandboxCommand>(
    const ProcessSpec&, const std::vector<std::string>& readable, const std::vector<std::string>& writable)>;

struct SandboxChoice {
  bool no_sandbox = false;         // --no-sandbox: do not even try (needs allow_unsandboxed)
  bool allow_unsandboxed = false;  // --allow-unsandboxed: run below the minimum, with a warning
  std::string bwrap = "bwrap";
};

// Sets `hook` (left empty when running unsandboxed) and `summary` ("bwrap 0.8.0, userns, ...",
// "none (--no-sandbox)"). `device` "cuda" binds the GPU device nodes and /sys. A Status saying why
// when untrusted code must not run: --no-sandbox without --allow-unsandboxed, or a probe below the
// minimum without it.
Status make_sandbox_hook(const SandboxChoice& choice, const TorchEnv& torch, const std::string& device,
                         Session& session, SandboxHook& hook, std::string& summary);

}  // namespace cudaagent
