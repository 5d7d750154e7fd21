// The sandbox flags of a tool that runs untrusted Python (cudaagent-verify, cudaagent-profile),
// turned into the hook that wraps each harness process: a thin layer over sandbox_runner.h's
// choose_sandbox, so every stage binds the same system, torch, toolkit and GPU paths.
#pragma once

#include <string>

#include "cudaagent/base/session.h"
#include "cudaagent/base/status.h"
#include "cudaagent/sandbox/runner.h"
#include "cudaagent/sandbox/torch_env.h"

namespace cudaagent {

using SandboxHook = SandboxWrapper;

struct SandboxFlags {
  bool no_sandbox = false;         // --no-sandbox: do not even try (needs allow_unsandboxed)
  bool allow_unsandboxed = false;  // --allow-unsandboxed: run below the minimum, with a warning
  std::string bwrap = "bwrap";
};

// Sets `hook` (left empty when running unsandboxed) and `summary` ("bwrap 0.8.0, userns, ...",
// "none (--no-sandbox)"). `device` "cuda" binds the GPU device nodes and /sys. A Status saying why
// when untrusted code must not run: --no-sandbox without --allow-unsandboxed, or a probe below the
// minimum without it.
Status make_sandbox_hook(const SandboxFlags& flags, const TorchEnv& torch, const std::string& device,
                         Session& session, SandboxHook& hook, std::string& summary);

}  // namespace cudaagent
