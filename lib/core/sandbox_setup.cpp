// make_sandbox_hook: moved out of verify_stage.cpp so cudaagent-profile wraps its timing processes
// exactly as verification does.
#include "cudaagent/sandbox_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "cudaagent/paths.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  dirs += ":/usr/local/cuda/bin";
  std::size_t start = 0;
  while (start < dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

// Read-only paths every sandboxed Python (and compiler) needs besides the system: the interpreter's
// prefix, torch's site-packages, the CUDA toolkit.
std::vector<std::string> runtime_paths(const TorchEnv& torch) {
  std::vector<std::string> paths = sandbox_system_paths();
  const fs::path python = torch.python;
  paths.push_back(python.parent_path().parent_path().string());
  paths.insert(paths.end(), torch.prefixes.begin(), torch.prefixes.end());
  for (const auto& include : torch.include_paths) {
    const fs::path path(include);
    // .../site-packages/torch/include -> .../site-packages
    if (path.filename() == "include" && path.parent_path().filename() == "torch") {
      paths.push_back(path.parent_path().parent_path().string());
    }
  }
  for (const auto& library : torch.library_paths) paths.push_back(library);
  paths.push_back("/usr/local/cuda");
  // The compilers may live outside the system paths (a toolkit under /opt, nvcc from a wheel):
  // bind the installation each one comes from, found the way the build will find it.
  for (const char* tool : {"nvcc", "g++"}) {
    if (const std::string found = find_in_path(tool); !found.empty()) {
      std::error_code error;
      const fs::path real = fs::canonical(found, error);
      if (!error) paths.push_back(real.parent_path().parent_path().string());
      paths.push_back(fs::path(found).parent_path().parent_path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  return paths;
}

std::vector<std::string> gpu_devices() {
  std::vector<std::string> devices;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/dev", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("nvidia", 0) == 0 && !entry.is_directory(error)) {
      devices.push_back(entry.path().string());
    }
  }
  return devices;
}

}  // namespace

Status make_sandbox_hook(const SandboxChoice& choice, const TorchEnv& torch, const std::string& device,
                         Session& session, SandboxHook& hook, std::string& summary) {
  hook = nullptr;
  if (choice.no_sandbox) {
    if (!choice.allow_unsandboxed) {
      return Status::error("--no-sandbox runs candidate code with no isolation; add "
                           "--allow-unsandboxed to confirm");
    }
    session.log.warn("running candidate code WITHOUT the OS sandbox (--no-sandbox)");
    summary = "none (--no-sandbox)";
    return Status::ok();
  }
  const SandboxProbe probe = probe_sandbox(choice.bwrap);
  if (!probe.meets_minimum()) {
    if (!choice.allow_unsandboxed) {
      std::string why = "the OS sandbox is below the minimum for untrusted code (" + probe.summary() + ")";
      for (const auto& note : probe.notes) why += "; " + note;
      return Status::error(why + "; pass --allow-unsandboxed to run anyway (never for rewards)");
    }
    session.log.warn("sandbox below the minimum (" + probe.summary() + "); running anyway");
    summary = probe.summary() + " (below minimum, allowed)";
    return Status::ok();
  }
  summary = probe.summary();
  SandboxPolicy base;
  base.read_only = runtime_paths(torch);
  base.read_only.push_back(share_dir() + "/harness");
  if (device == "cuda") {
    base.devices = gpu_devices();
    base.bind_sys = true;
  }
  hook = [base, probe](const ProcessSpec& inner, const std::vector<std::string>& readable,
                       const std::vector<std::string>& writable) -> Result<SandboxCommand> {
    SandboxPolicy policy = base;
    policy.read_only.insert(policy.read_only.end(), readable.begin(), readable.end());
    policy.writable = writable;
    return sandbox_command(inner, policy, probe);
  };
  return Status::ok();
}

}  // namespace cudaagent
