// The sandbox decision shared by the stages that run untrusted code. The probe runs once per
// tool run; the wrapper it returns builds a fresh SandboxCommand per process (a command holds a
// seccomp memfd that can be read once).
#include "cudaagent/sandbox/runner.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "cudaagent/sandbox/sandbox.h"

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

}  // namespace

std::vector<std::string> torch_runtime_paths(const TorchEnv& torch) {
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

std::vector<std::string> gpu_device_nodes() {
  std::vector<std::string> devices;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/dev", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("nvidia", 0) == 0 && !entry.is_directory(error)) {
      devices.push_back(entry.path().string());
    }
  }
  std::sort(devices.begin(), devices.end());
  return devices;
}

Result<SandboxChoice> choose_sandbox(const SandboxRequest& request, Logger& log) {
  if (request.no_sandbox) {
    if (!request.allow_unsandboxed) {
      return Status::error("--no-sandbox runs untrusted code with no isolation; add "
                           "--allow-unsandboxed to confirm");
    }
    log.warn("running untrusted code WITHOUT the OS sandbox (--no-sandbox)");
    return SandboxChoice{{}, "none (--no-sandbox)"};
  }
  const SandboxProbe probe = probe_sandbox(request.bwrap);
  if (!probe.meets_minimum()) {
    if (!request.allow_unsandboxed) {
      std::string why =
          "the OS sandbox is below the minimum for untrusted code (" + probe.summary() + ")";
      for (const auto& note : probe.notes) why += "; " + note;
      return Status::error(why + "; pass --allow-unsandboxed to run anyway (never for rewards)");
    }
    log.warn("sandbox below the minimum (" + probe.summary() + "); running anyway");
    return SandboxChoice{{}, probe.summary() + " (below minimum, allowed)"};
  }
  SandboxPolicy base;
  base.read_only = request.read_only;
  if (request.gpu) {
    base.devices = gpu_device_nodes();
    base.bind_sys = true;
  }
  SandboxWrapper wrap = [base, probe](const ProcessSpec& inner,
                                      const std::vector<std::string>& readable,
                                      const std::vector<std::string>& writable)
      -> Result<SandboxCommand> {
    SandboxPolicy policy = base;
    policy.read_only.insert(policy.read_only.end(), readable.begin(), readable.end());
    policy.writable = writable;
    return sandbox_command(inner, policy, probe);
  };
  return SandboxChoice{std::move(wrap), probe.summary()};
}

SandboxWrapper honour_stop(SandboxWrapper wrap, const std::atomic<int>* stop) {
  if (!wrap) return wrap;
  return [wrap = std::move(wrap), stop](const ProcessSpec& spec, const std::vector<std::string>& readable,
                                        const std::vector<std::string>& writable) -> Result<SandboxCommand> {
    auto command = wrap(spec, readable, writable);
    if (command) command.value().spec.stop = stop;
    return command;
  };
}

std::unique_ptr<HarnessWorker> make_harness_worker(const HarnessWorkerPlan& plan) {
  HarnessWorkerOptions options;
  options.process.argv = {plan.python, "-I", "-B", plan.harness_dir + "/worker.py", "--preload=torch"};
  for (const std::string& module : plan.warm_modules) {
    options.process.argv.push_back("--preload-optional=" + module);
  }
  options.process.env = plan.env;
  options.process.limits.file_size_bytes = std::uint64_t{8} << 30;
  options.process.limits.open_files = 4096;
  options.process.run_as = plan.run_as;
  options.log_path = plan.log_path;
  options.stop = plan.stop;
  if (plan.wrap) {
    options.wrap = [wrap = plan.wrap, readable = plan.readable, writable = plan.writable](const ProcessSpec& spec) {
      return wrap(spec, readable, writable);
    };
  }
  return std::make_unique<HarnessWorker>(std::move(options));
}

std::function<Result<ProcessResult>(const ProcessSpec&)> sandboxed_build_runner(
    const SandboxWrapper& wrap, const std::string& work, const std::string& cache,
    const std::atomic<int>* stop) {
  return [wrap, work, cache, stop](const ProcessSpec& spec) -> Result<ProcessResult> {
    auto command = wrap(spec, {}, {work, cache});
    if (!command) return command.status();
    if (stop != nullptr) command.value().spec.stop = stop;
    return run_process(command.value().spec);
  };
}

std::vector<std::string> harness_environment(const std::string& home) {
  return {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "LC_ALL=C.UTF-8", "OMP_NUM_THREADS=1",
          "USER=cudaagent", "LOGNAME=cudaagent"};
}

}  // namespace cudaagent
