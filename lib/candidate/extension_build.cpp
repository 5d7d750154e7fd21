// The build driver. Compiler commands are argv vectors run through run_process (optionally inside
// the sandbox via options.runner); objects land in a content-addressed cache with atomic renames, so
// concurrent builds share work safely and a killed build leaves no half-written object behind.
#include "cudaagent/candidate/extension_build.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "cudaagent/base/files.h"
#include "cudaagent/base/sha256.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Tool {
  std::string path;
  std::string version;
};

Result<Tool> find_tool(const std::string& name, const std::vector<std::string>& fallbacks) {
  std::vector<std::string> candidates;
  if (name.find('/') != std::string::npos) {
    candidates.push_back(name);
  } else {
    const char* path = std::getenv("PATH");
    std::string dirs = path != nullptr ? path : "";
    std::size_t start = 0;
    while (start <= dirs.size()) {
      const std::size_t end = std::min(dirs.find(':', start), dirs.size());
      if (end > start) candidates.push_back(dirs.substr(start, end - start) + "/" + name);
      start = end + 1;
    }
    candidates.insert(candidates.end(), fallbacks.begin(), fallbacks.end());
  }
  for (const std::string& candidate : candidates) {
    if (::access(candidate.c_str(), X_OK) != 0) continue;
    ProcessSpec spec;
    spec.argv = {candidate, "--version"};
    spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
    spec.timeout_seconds = 30;
    auto run = run_process(spec);
    if (!run || run.value().exit_code != 0) continue;
    return Tool{candidate, run.value().out};
  }
  return Status::error("cannot find the compiler '" + name + "'");
}

std::string read_or_empty(const std::string& path) {
  std::string bytes;
  (void)read_whole_file(path, bytes);
  return bytes;
}

struct Job {
  std::string source;               // relative name
  bool nvcc = false;
  bool uses_torch_header = false;   // compile with the precompiled torch header
  std::string object;               // absolute output path
  std::string key;
};

}  // namespace

// The first `max_lines` warning lines of a successful compile (gcc ": warning:", nvcc
// "warning #"), with the workspace prefix stripped: what the agent may want to fix next.
std::string warning_lines(const std::string& log, const std::string& strip_prefix, std::size_t max_lines) {
  std::string out;
  std::size_t count = 0, start = 0;
  while (start < log.size() && count < max_lines) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(start, end - start);
    start = end + 1;
    if (line.find(": warning:") == std::string::npos && line.find("warning #") == std::string::npos) continue;
    for (std::size_t at; !strip_prefix.empty() && (at = line.find(strip_prefix)) != std::string::npos;) {
      line.erase(at, strip_prefix.size());
    }
    if (line.size() > 400) line = line.substr(0, 400) + "...";
    out += line + "\n";
    ++count;
  }
  return out;
}

std::string trim_diagnostics(const std::string& log, const std::string& strip_prefix,
                             std::size_t max_errors) {
  std::string out;
  std::size_t count = 0, start = 0;
  while (start < log.size() && count < max_errors) {
    std::size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(start, end - start);
    start = end + 1;
    if (line.find("error") == std::string::npos) continue;
    // gcc: "path:12:5: error: message"; nvcc: "path(12): error: message".
    const bool gcc_style = line.find(": error:") != std::string::npos ||
                           line.find(": fatal error:") != std::string::npos;
    const bool nvcc_style = line.find("): error") != std::string::npos;
    if (!gcc_style && !nvcc_style) continue;
    if (!strip_prefix.empty()) {
      for (std::size_t at; (at = line.find(strip_prefix)) != std::string::npos;) {
        line.erase(at, strip_prefix.size());
      }
    }
    if (line.size() > 400) line = line.substr(0, 400) + "...";
    out += line + "\n";
    ++count;
  }
  return out;
}

Result<BuildResult> build_extension(const std::string& workspace_dir, const std::string& out_dir,
                                    const TorchEnv& torch, const BuildOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  auto cxx = find_tool(options.cxx, {});
  if (!cxx) return cxx.status();
  Tool nvcc;
  if (options.cuda) {
    auto found = find_tool(options.nvcc, {"/usr/local/cuda/bin/nvcc"});
    if (!found) return found.status();
    nvcc = found.value();
  }
  if (!make_directories(out_dir)) return Status::error("cannot create '" + out_dir + "'");
  const std::string cache = options.cache_dir.empty() ? out_dir + "/cache" : options.cache_dir;
  if (!make_directories(cache + "/objects") || !make_directories(cache + "/pch")) {
    return Status::error("cannot create the build cache in '" + cache + "'");
  }

  // Sources and the headers every object depends on (any header change rebuilds all objects).
  std::vector<Job> jobs;
  Sha256 headers;
  headers.add_part(read_or_empty(workspace_dir + "/binding_registry.h"));
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(workspace_dir + "/kernels", error)) {
    names.push_back("kernels/" + entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const bool is_header = name.ends_with(".h") || name.ends_with(".cuh");
    if (is_header) {
      headers.add_part(name).add_part(read_or_empty(workspace_dir + "/" + name));
    } else if (name.ends_with(".cu")) {
      if (options.cuda) jobs.push_back({name, true, false, {}, {}});
    } else if (name.ends_with(".cpp")) {
      jobs.push_back({name, false, true, {}, {}});
    }
  }
  jobs.push_back({"binding.cpp", false, true, {}, {}});
  const std::string header_hash = headers.hex_digest();

  // Flags shared by every host compile, in the order torch.utils.cpp_extension uses them.
  const std::string abi = torch.cxx11_abi ? "1" : "0";
  std::vector<std::string> defines = {"-DTORCH_EXTENSION_NAME=" + options.module_name,
                                      "-DTORCH_API_INCLUDE_EXTENSION_H",
                                      "-D_GLIBCXX_USE_CXX11_ABI=" + abi};
  if (options.cuda) defines.push_back("-DWITH_CUDA");
  // System includes are part of every cache key; the job's own directories are not (they differ
  // per job while the bytes they hold are hashed anyway).
  std::vector<std::string> includes;
  // "-isystem" and its path as two arguments: nvcc rejects the joined form.
  for (const auto& path : torch.include_paths) includes.insert(includes.end(), {"-isystem", path});
  if (options.cuda) includes.insert(includes.end(), {"-isystem", "/usr/local/cuda/include"});
  const std::vector<std::string> job_includes = {"-I" + workspace_dir,
                                                 "-I" + workspace_dir + "/kernels"};
  std::vector<std::string> cxx_flags = {"-O2", "-std=c++17", "-fPIC", "-w"};
  cxx_flags.insert(cxx_flags.end(), defines.begin(), defines.end());

  std::string arch = options.cuda_arch.empty() ? torch.gpu_arch : options.cuda_arch;
  if (arch.empty()) arch = "90";
  std::vector<std::string> nvcc_flags = {
      "-O3", "--use_fast_math", "-std=c++17", "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr",
      "-gencode=arch=compute_" + arch + ",code=sm_" + arch, "-D__CUDA_NO_HALF_OPERATORS__",
      "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
      "-D__CUDA_NO_HALF2_OPERATORS__", "-w"};
  nvcc_flags.insert(nvcc_flags.end(), defines.begin(), defines.end());

  const auto joined = [](const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& part : parts) out += part + '\x1f';
    return out;
  };
  const auto base_env = std::vector<std::string>{"PATH=/usr/local/cuda/bin:/usr/bin:/bin",
                                                 "LC_ALL=C", "HOME=/nonexistent", "TMPDIR=/tmp"};
  const auto run_tool = [&](std::vector<std::string> argv, double timeout) -> Result<ProcessResult> {
    ProcessSpec spec;
    spec.argv = std::move(argv);
    spec.env = base_env;
    spec.timeout_seconds = timeout;
    spec.stdout_cap = spec.stderr_cap = options.log_cap_bytes;
    spec.working_dir = workspace_dir;
    return options.runner ? options.runner(spec) : run_process(spec);
  };

  BuildResult result;
  // The precompiled torch header: built once per toolchain, torch and flags.
  const std::string pch_key = Sha256()
                                  .add_part(cxx.value().path)
                                  .add_part(cxx.value().version)
                                  .add_part(joined(cxx_flags))
                                  .add_part(joined(includes))
                                  .add_part(torch.torch_version)
                                  .hex_digest();
  const std::string pch_dir = cache + "/pch/" + pch_key;
  const std::string pch_header = pch_dir + "/cudaagent_torch.h";
  std::optional<CompileStep> pch_step;
  if (!fs::exists(pch_header + ".gch")) {
    const auto pch_start = std::chrono::steady_clock::now();
    make_directories(pch_dir);
    if (!write_file_atomically(pch_header, "#include <torch/extension.h>\n")) {
      return Status::error("cannot write '" + pch_header + "'");
    }
    std::vector<std::string> argv = {cxx.value().path};
    argv.insert(argv.end(), cxx_flags.begin(), cxx_flags.end());
    argv.insert(argv.end(), includes.begin(), includes.end());
    const std::string temp = pch_header + ".gch.tmp." + std::to_string(::getpid());
    argv.insert(argv.end(), {"-x", "c++-header", pch_header, "-o", temp});
    auto run = run_tool(argv, options.compile_timeout_seconds);
    if (!run) return run.status();
    if (run.value().outcome != ProcessResult::Outcome::kExited || run.value().exit_code != 0) {
      return Status::error("cannot precompile torch/extension.h (" + run.value().describe() +
                           "): " + trim_diagnostics(run.value().err, "", 3));
    }
    fs::rename(temp, pch_header + ".gch", error);
    pch_step = CompileStep{"(precompiled torch header)", "g++", /*cached=*/false, seconds_since(pch_start), /*ok=*/true};
  }

  for (Job& job : jobs) {
    const std::string source = read_or_empty(workspace_dir + "/" + job.source);
    Sha256 key;
    key.add_part(job.nvcc ? nvcc.path + nvcc.version : cxx.value().path + cxx.value().version);
    key.add_part(joined(job.nvcc ? nvcc_flags : cxx_flags)).add_part(joined(includes));
    key.add_part(header_hash).add_part(job.source).add_part(source).add_part(pch_key);
    job.key = key.hex_digest();
    job.object = cache + "/objects/" + job.key + ".o";
  }

  std::mutex mutex;
  std::atomic<std::size_t> next{0};
  result.steps.resize(jobs.size());
  Status machinery = Status::ok();
  const auto worker = [&]() {
    for (std::size_t index; (index = next++) < jobs.size();) {
      const Job& job = jobs[index];
      CompileStep step{job.source, job.nvcc ? "nvcc" : "g++", false, 0, false};
      const auto start = std::chrono::steady_clock::now();
      if (fs::exists(job.object)) {
        step.cached = step.ok = true;
      } else {
        const std::string temp = job.object + ".tmp." + std::to_string(::getpid()) + "." +
                                 std::to_string(index);
        std::vector<std::string> argv = {job.nvcc ? nvcc.path : cxx.value().path};
        const auto& flags = job.nvcc ? nvcc_flags : cxx_flags;
        argv.insert(argv.end(), flags.begin(), flags.end());
        argv.insert(argv.end(), job_includes.begin(), job_includes.end());
        argv.insert(argv.end(), includes.begin(), includes.end());
        // -Winvalid-pch: a header gcc silently declines to use costs seconds per file; say why.
        if (job.uses_torch_header) argv.insert(argv.end(), {"-Winvalid-pch", "-include", pch_header});
        argv.insert(argv.end(), {"-c", workspace_dir + "/" + job.source, "-o", temp});
        auto run = run_tool(argv, options.compile_timeout_seconds);
        std::lock_guard lock(mutex);
        if (!run) {
          machinery = run.status();
        } else if (run.value().outcome == ProcessResult::Outcome::kExited &&
                   run.value().exit_code == 0) {
          std::error_code rename_error;
          fs::rename(temp, job.object, rename_error);
          step.ok = !rename_error;
          const std::string said = run.value().err + run.value().out;
          if (!said.empty() && result.warnings.size() < 2000) {
            result.warnings += warning_lines(said, workspace_dir + "/", 3);
          }
        } else {
          const ProcessResult& failed = run.value();
          result.log += "== " + job.source + " (" + failed.describe() + ")\n" + failed.err + failed.out;
          result.diagnostics += trim_diagnostics(failed.err + failed.out, workspace_dir + "/");
          if (failed.outcome == ProcessResult::Outcome::kTimedOut) {
            result.diagnostics += job.source + ": compiler " + failed.describe() + "\n";
          }
          fs::remove(temp, error);
        }
      }
      step.seconds = seconds_since(start);
      std::lock_guard lock(mutex);
      result.steps[index] = step;
    }
  };
  std::vector<std::thread> threads;
  const int count = std::max(1, std::min<int>(options.jobs, static_cast<int>(jobs.size())));
  for (int i = 0; i < count; ++i) threads.emplace_back(worker);
  for (auto& thread : threads) thread.join();
  if (!machinery) return machinery;
  if (pch_step) result.steps.insert(result.steps.begin(), *pch_step);

  result.ok = std::all_of(result.steps.begin(), result.steps.end(),
                          [](const CompileStep& step) { return step.ok; });
  if (result.ok) {
    result.module_path = out_dir + "/" + options.module_name + torch.extension_suffix;
    std::vector<std::string> argv = {cxx.value().path, "-shared", "-o", result.module_path};
    for (const Job& job : jobs) argv.push_back(job.object);
    for (const auto& path : torch.library_paths) {
      argv.push_back("-L" + path);
      argv.push_back("-Wl,-rpath," + path);
    }
    for (const auto& library : torch.libraries) {
      if (!options.cuda && (library == "c10_cuda" || library == "torch_cuda" || library == "cudart")) continue;
      argv.push_back("-l" + library);
    }
    if (options.cuda) argv.push_back("-L/usr/local/cuda/lib64");
    const auto start = std::chrono::steady_clock::now();
    auto run = run_tool(argv, options.compile_timeout_seconds);
    if (!run) return run.status();
    CompileStep link{"(link)", "g++", false, seconds_since(start), false};
    if (run.value().outcome == ProcessResult::Outcome::kExited && run.value().exit_code == 0) {
      link.ok = true;
    } else {
      result.ok = false;
      result.log += "== link (" + run.value().describe() + ")\n" + run.value().err;
      result.diagnostics += "link: " + trim_diagnostics(run.value().err, workspace_dir + "/", 4);
      if (result.diagnostics == "link: ") result.diagnostics += run.value().err.substr(0, 400);
    }
    result.steps.push_back(link);
  }
  result.seconds = seconds_since(started);
  return result;
}

}  // namespace cudaagent
