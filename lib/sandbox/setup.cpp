// make_sandbox_hook: the tools' sandbox flags through choose_sandbox (sandbox_runner.cpp).
#include "cudaagent/sandbox/setup.h"

#include "cudaagent/base/paths.h"

namespace cudaagent {

Status make_sandbox_hook(const SandboxFlags& flags, const TorchEnv& torch, const std::string& device,
                         Session& session, SandboxHook& hook, std::string& summary) {
  SandboxRequest request;
  request.bwrap = flags.bwrap;
  request.allow_unsandboxed = flags.allow_unsandboxed;
  request.no_sandbox = flags.no_sandbox;
  request.read_only = torch_runtime_paths(torch);
  request.read_only.push_back(share_dir() + "/harness");
  request.gpu = device == "cuda";
  auto choice = choose_sandbox(request, session.log);
  if (!choice) return choice.status();
  hook = std::move(choice.value().wrap);
  summary = choice.value().summary;
  return Status::ok();
}

}  // namespace cudaagent
