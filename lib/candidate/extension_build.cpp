// The build driver. Compiler commands are argv vectors run through run_process (optionally inside
// the sandbox via options.runner) under the per-process limits and the build budget; objects land
// in a content-addressed cache with atomic renames, so concurrent builds share work safely and a
// killed build leaves no half-written object behind; linked modules are cached the same way.
#include "cudaagent/candidate/extension_build.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "cudaagent/base/file_lock.h"
#include "cudaagent/base/files.h"
#include "cudaagent/base/sha256.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

using BuildClock = std::chrono::steady_clock;

double seconds_since(BuildClock::time_point start) {
  return std::chrono::duration<double>(BuildClock::now() - start).count();
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

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) out += part + '\x1f';
  return out;
}

struct Job {
  std::string source;               // relative name
  bool nvcc = false;
  bool uses_torch_header = false;   // compile with the precompiled torch header
  std::string object;               // absolute output path
  std::string key;
};

// One build: the tools, flags and budget shared by its compiler commands.
class Builder {
 public:
  Builder(const std::string& workspace_dir, const TorchEnv& torch, const BuildOptions& options)
      : workspace_(workspace_dir), torch_(torch), options_(options), budget_(options.limits) {}

  Result<BuildResult> run(const std::string& out_dir);

 private:
  Status prepare(const std::string& out_dir);
  void plan_jobs();
  Status precompile_header();
  void compile_all();
  void compile_one(std::size_t index);
  void link(const std::string& out_dir);

  // Runs one command under the limits and the remaining budget. nullopt when the budget is spent
  // (the step then fails with `budget_reason`); a Status when the machinery failed.
  Result<std::optional<ProcessResult>> run_tool(std::vector<std::string> argv, bool header,
                                                std::string& budget_reason,
                                                StepOutcome& outcome);
  // Records a failed step's filtered output; resource failures win over compile errors.
  void record_failure(const std::string& label, const ProcessResult* run,
                      const StepOutcome& outcome);
  std::string filtered(const std::string& text) const {
    return filter_compiler_output(text, scope_, options_.log_cap_bytes);
  }

  const std::string workspace_;
  const TorchEnv& torch_;
  const BuildOptions& options_;
  BuildBudget budget_;
  BuildClock::time_point started_ = BuildClock::now();  // reset after the precompiled header
  Tool cxx_, nvcc_;
  std::string cache_;
  std::vector<Job> jobs_;
  std::string header_hash_, pch_key_, pch_header_;
  std::vector<std::string> cxx_flags_, nvcc_flags_, includes_, job_includes_;
  DiagnosticScope scope_;
  std::mutex mutex_;  // guards result_ and machinery_ while compiles run in parallel
  BuildResult result_;
  Status machinery_ = Status::ok();
};

Status Builder::prepare(const std::string& out_dir) {
  auto cxx = find_tool(options_.cxx, {});
  if (!cxx) return cxx.status();
  cxx_ = cxx.value();
  if (options_.cuda) {
    auto found = find_tool(options_.nvcc, {"/usr/local/cuda/bin/nvcc"});
    if (!found) return found.status();
    nvcc_ = found.value();
  }
  if (!make_directories(out_dir)) return Status::error("cannot create '" + out_dir + "'");
  cache_ = options_.cache_dir.empty() ? out_dir + "/cache" : options_.cache_dir;
  result_.cache_dir = cache_;
  if (!make_directories(cache_ + "/objects") || !make_directories(cache_ + "/pch") ||
      !make_directories(cache_ + "/modules")) {
    return Status::error("cannot create the build cache in '" + cache_ + "'");
  }

  // Flags shared by every host compile, in the order torch.utils.cpp_extension uses them.
  const std::string abi = torch_.cxx11_abi ? "1" : "0";
  std::vector<std::string> defines = {"-DTORCH_EXTENSION_NAME=" + options_.module_name,
                                      "-DTORCH_API_INCLUDE_EXTENSION_H",
                                      "-D_GLIBCXX_USE_CXX11_ABI=" + abi};
  if (options_.cuda) defines.push_back("-DWITH_CUDA");
  // System includes are part of every cache key; the job's own directories are not (they differ
  // per job while the bytes they hold are hashed anyway). "-isystem" and its path as two
  // arguments: nvcc rejects the joined form.
  for (const auto& path : torch_.include_paths) includes_.insert(includes_.end(), {"-isystem", path});
  if (options_.cuda) includes_.insert(includes_.end(), {"-isystem", "/usr/local/cuda/include"});
  job_includes_ = {"-I" + workspace_, "-I" + workspace_ + "/kernels"};
  // Line tables (-g1) tell the candidate's code from pybind11's glue in the objects
  // (object_lines.h); DWARF 4 because binutils 2.40 misreads GCC 12's DWARF 5 in relocatable
  // objects. Debug information never changes the code GCC generates.
  cxx_flags_ = {"-O" + std::to_string(options_.host_optimization), "-std=c++17", "-fPIC", "-w",
                "-g1", "-gdwarf-4"};
  cxx_flags_.insert(cxx_flags_.end(), defines.begin(), defines.end());
  std::string arch = options_.cuda_arch.empty() ? torch_.gpu_arch : options_.cuda_arch;
  if (arch.empty()) arch = "90";
  nvcc_flags_ = {
      "-O3", "--use_fast_math", "-std=c++17", "-Xcompiler", "-fPIC,-g1,-gdwarf-4", "--expt-relaxed-constexpr",
      "-gencode=arch=compute_" + arch + ",code=sm_" + arch, "-D__CUDA_NO_HALF_OPERATORS__",
      "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
      "-D__CUDA_NO_HALF2_OPERATORS__", "-w"};
  nvcc_flags_.insert(nvcc_flags_.end(), defines.begin(), defines.end());

  scope_.workspace_dir = fs::path(workspace_).lexically_normal().string();
  while (scope_.workspace_dir.size() > 1 && scope_.workspace_dir.back() == '/') {
    scope_.workspace_dir.pop_back();
  }
  scope_.public_roots = public_header_roots(torch_);
  scope_.public_roots.push_back(cache_ + "/pch");  // -Winvalid-pch names the header it declined
  result_.glue_roots = scope_.public_roots;
  return Status::ok();
}

// Sources and the headers every object depends on (any header change rebuilds all objects).
void Builder::plan_jobs() {
  Sha256 headers;
  for (const char* name : {"binding_registry.h", "binding.cpp"}) {
    scope_.files[name] = read_or_empty(workspace_ + "/" + name);
  }
  headers.add_part(scope_.files["binding_registry.h"]);
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(workspace_ + "/kernels", error)) {
    names.push_back("kernels/" + entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string bytes = read_or_empty(workspace_ + "/" + name);
    const bool is_header = name.ends_with(".h") || name.ends_with(".cuh");
    if (is_header) {
      headers.add_part(name).add_part(bytes);
    } else if (name.ends_with(".cu")) {
      if (options_.cuda) jobs_.push_back({name, true, false, {}, {}});
    } else if (name.ends_with(".cpp")) {
      jobs_.push_back({name, false, true, {}, {}});
    }
    scope_.files[name] = std::move(bytes);
  }
  jobs_.push_back({"binding.cpp", false, true, {}, {}});
  header_hash_ = headers.hex_digest();
}

Result<std::optional<ProcessResult>> Builder::run_tool(std::vector<std::string> argv, bool header,
                                                       std::string& budget_reason,
                                                       StepOutcome& outcome) {
  // The precompiled header has no candidate input: it runs under the per-process limits only,
  // and neither its time nor its CPU is charged to the candidate's build.
  BuildBudget::Allowance allowance;
  if (header) {
    allowance.timeout = options_.limits.process_seconds;
    allowance.cpu_seconds = options_.limits.cpu_seconds;
  } else {
    allowance = budget_.allowance(seconds_since(started_));
  }
  if (allowance.exhausted) {
    budget_reason = allowance.reason;
    outcome = {StepFailure::kResource, allowance.reason};
    return std::optional<ProcessResult>();
  }
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = {"PATH=/usr/local/cuda/bin:/usr/bin:/bin", "LC_ALL=C", "HOME=/nonexistent",
              "TMPDIR=/tmp"};
  spec.timeout_seconds = allowance.timeout;
  spec.stdout_cap = spec.stderr_cap = options_.log_cap_bytes;
  spec.working_dir = workspace_;
  spec.limits = compiler_process_limits(options_.limits, allowance.cpu_seconds, header);
  auto run = options_.runner ? options_.runner(spec) : run_process(spec);
  if (!run) return run.status();
  if (run.value().outcome == ProcessResult::Outcome::kSpawnFailed) {
    return Status::error("cannot run '" + spec.argv.front() + "': " + run.value().spawn_error);
  }
  if (!header) budget_.charge(run.value().user_cpu_seconds + run.value().system_cpu_seconds);
  outcome = judge_compiler_run(run.value(), options_.limits, allowance.cpu_seconds,
                               allowance.timeout);
  return std::optional<ProcessResult>(std::move(run).value());
}

void Builder::record_failure(const std::string& label, const ProcessResult* run,
                             const StepOutcome& outcome) {
  const std::string prefix = workspace_ + "/";
  std::string said;
  if (run != nullptr) said = filtered(run->err + run->out);
  result_.log += "== " + label + " (" + (run != nullptr ? run->describe() : outcome.reason) + ")\n";
  result_.log += said;
  std::string errors = trim_diagnostics(said, prefix);
  if (label == "link" && !errors.empty()) errors = "link: " + errors;
  result_.diagnostics += errors;
  if (outcome.failure == StepFailure::kResource) {
    result_.diagnostics += label + ": " + outcome.reason + "\n";
    if (result_.failure != StepFailure::kResource) {
      result_.failure = StepFailure::kResource;
      result_.reason = label + ": " + outcome.reason;
    }
  } else if (result_.failure == StepFailure::kNone) {
    result_.failure = StepFailure::kCompile;
  }
}

// The precompiled torch header: built once per toolchain, torch and flags. It has no candidate
// input, so its failure is the machinery's, not the candidate's.
Status Builder::precompile_header() {
  pch_key_ = Sha256()
                 .add_part(cxx_.path)
                 .add_part(cxx_.version)
                 .add_part(joined(cxx_flags_))
                 .add_part(joined(includes_))
                 .add_part(torch_.torch_version)
                 .hex_digest();
  const std::string pch_dir = cache_ + "/pch/" + pch_key_;
  pch_header_ = pch_dir + "/cudaagent_torch.h";
  if (fs::exists(pch_header_ + ".gch")) return Status::ok();
  const auto start = BuildClock::now();
  make_directories(pch_dir);
  // Builders that start cold at once (workers of one job, jobs of one node) would each spend a
  // minute of CPU and hundreds of MB on the same header: one builds it, the others wait for it.
  // The wait is bounded by the header's own process limit; past it, each builds its own again.
  // A lock that cannot be taken (an unwritable cache, the wait ran out) only costs the work.
  const auto lock = FileLock::acquire(pch_dir + "/build.lock", options_.limits.process_seconds + 30,
                                      "another build making the header");
  if (fs::exists(pch_header_ + ".gch")) return Status::ok();
  if (!write_file_atomically(pch_header_, "#include <torch/extension.h>\n")) {
    return Status::error("cannot write '" + pch_header_ + "'");
  }
  std::vector<std::string> argv = {cxx_.path};
  argv.insert(argv.end(), cxx_flags_.begin(), cxx_flags_.end());
  argv.insert(argv.end(), includes_.begin(), includes_.end());
  const std::string temp = temporary_sibling(pch_header_ + ".gch");
  argv.insert(argv.end(), {"-x", "c++-header", pch_header_, "-o", temp});
  std::string budget_reason;
  StepOutcome outcome;
  auto run = run_tool(argv, /*header=*/true, budget_reason, outcome);
  if (!run) return run.status();
  if (!run.value()) return Status::error("cannot precompile torch/extension.h: " + budget_reason);
  const ProcessResult& done = *run.value();
  if (outcome.failure != StepFailure::kNone) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    return Status::error("cannot precompile torch/extension.h (" + done.describe() +
                         (outcome.reason.empty() ? "" : ", " + outcome.reason) + "): " +
                         trim_diagnostics(filtered(done.err), "", 3));
  }
  std::error_code error;
  fs::rename(temp, pch_header_ + ".gch", error);
  CompileStep step{"(precompiled torch header)", "g++", {}, false, seconds_since(start),
                   done.user_cpu_seconds + done.system_cpu_seconds, true, StepFailure::kNone};
  result_.steps.push_back(step);
  return Status::ok();
}

void Builder::compile_one(std::size_t index) {
  const Job& job = jobs_[index];
  CompileStep step{job.source, job.nvcc ? "nvcc" : "g++", {}, false, 0, 0, false,
                   StepFailure::kNone};
  const auto start = BuildClock::now();
  if (fs::exists(job.object)) {
    step.cached = step.ok = true;
    step.object = job.object;
  } else {
    // Builds on other threads may compile the same object (binding.cpp is the same in every
    // workspace): each writes its own temporary and renames it over the object, which is
    // content-addressed, so whichever rename lands last leaves the same bytes.
    const std::string temp = temporary_sibling(job.object);
    std::vector<std::string> argv = {job.nvcc ? nvcc_.path : cxx_.path};
    const auto& flags = job.nvcc ? nvcc_flags_ : cxx_flags_;
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), job_includes_.begin(), job_includes_.end());
    argv.insert(argv.end(), includes_.begin(), includes_.end());
    // -Winvalid-pch: a header gcc silently declines to use costs seconds per file; say why.
    if (job.uses_torch_header) argv.insert(argv.end(), {"-Winvalid-pch", "-include", pch_header_});
    argv.insert(argv.end(), {"-c", workspace_ + "/" + job.source, "-o", temp});
    std::string budget_reason;
    StepOutcome outcome;
    auto run = run_tool(argv, /*header=*/false, budget_reason, outcome);
    std::lock_guard lock(mutex_);
    if (!run) {
      machinery_ = run.status();
    } else {
      const ProcessResult* done = run.value() ? &*run.value() : nullptr;
      if (done != nullptr) step.cpu_seconds = done->user_cpu_seconds + done->system_cpu_seconds;
      if (outcome.failure == StepFailure::kNone) {
        std::error_code rename_error;
        fs::rename(temp, job.object, rename_error);
        step.ok = !rename_error;
        if (step.ok) step.object = job.object;
        const std::string said = filtered(done->err + done->out);
        if (!said.empty() && result_.warnings.size() < 2000) {
          result_.warnings += warning_lines(said, workspace_ + "/", 3);
        }
      } else {
        step.failure = outcome.failure;
        record_failure(job.source, done, outcome);
        std::error_code ignored;
        fs::remove(temp, ignored);
      }
    }
  }
  step.seconds = seconds_since(start);
  std::lock_guard lock(mutex_);
  result_.steps[index] = step;
}

void Builder::compile_all() {
  for (Job& job : jobs_) {
    const std::string source = scope_.files[job.source];
    Sha256 key;
    key.add_part(job.nvcc ? nvcc_.path + nvcc_.version : cxx_.path + cxx_.version);
    key.add_part(joined(job.nvcc ? nvcc_flags_ : cxx_flags_)).add_part(joined(includes_));
    key.add_part(header_hash_).add_part(job.source).add_part(source).add_part(pch_key_);
    job.key = key.hex_digest();
    job.object = cache_ + "/objects/" + job.key + ".o";
  }
  std::vector<CompileStep> steps(jobs_.size());
  std::swap(steps, result_.steps);  // compile_one fills result_.steps[index]
  std::atomic<std::size_t> next{0};
  const auto worker = [&]() {
    for (std::size_t index; (index = next++) < jobs_.size();) compile_one(index);
  };
  std::vector<std::thread> threads;
  const int count = std::max(1, std::min<int>(options_.jobs, static_cast<int>(jobs_.size())));
  for (int i = 0; i < count; ++i) threads.emplace_back(worker);
  for (auto& thread : threads) thread.join();
  // Put the header's step (if any) back in front.
  steps.insert(steps.end(), result_.steps.begin(), result_.steps.end());
  result_.steps = std::move(steps);
}

void Builder::link(const std::string& out_dir) {
  result_.module_path = out_dir + "/" + options_.module_name + torch_.extension_suffix;
  // The linked module is cached like the objects, under the link's whole command (the objects are
  // content-addressed): profile links what verify linked, and it costs a g++ run against libtorch.
  Sha256 key;
  key.add_part(cxx_.path + cxx_.version).add_part(options_.module_name + torch_.extension_suffix);
  std::vector<std::string> argv = {cxx_.path, "-shared", "-o", result_.module_path};
  // The objects' line tables are for the object check only: the module is loaded without them.
  argv.push_back("-Wl,--strip-debug");
  for (const Job& job : jobs_) argv.push_back(job.object);
  for (const auto& path : torch_.library_paths) {
    argv.push_back("-L" + path);
    argv.push_back("-Wl,-rpath," + path);
  }
  for (const auto& library : torch_.libraries) {
    if (!options_.cuda &&
        (library == "c10_cuda" || library == "torch_cuda" || library == "cudart")) {
      continue;
    }
    argv.push_back("-l" + library);
  }
  if (options_.cuda) argv.push_back("-L/usr/local/cuda/lib64");
  // Everything after the output path: the output's own name differs from build to build.
  key.add_part(joined(std::vector<std::string>(argv.begin() + 4, argv.end())));
  const std::string cached = cache_ + "/modules/" + key.hex_digest() + torch_.extension_suffix;
  const auto start = BuildClock::now();
  std::error_code copy_error;
  if (fs::exists(cached) && fs::copy_file(cached, result_.module_path, fs::copy_options::overwrite_existing, copy_error)) {
    result_.steps.push_back({"(link)", "g++", {}, true, seconds_since(start), 0, true, StepFailure::kNone});
    return;
  }
  std::string budget_reason;
  StepOutcome outcome;
  auto run = run_tool(argv, /*header=*/false, budget_reason, outcome);
  if (!run) {
    machinery_ = run.status();
    return;
  }
  const ProcessResult* done = run.value() ? &*run.value() : nullptr;
  CompileStep step{"(link)", "g++", {}, false, seconds_since(start),
                   done != nullptr ? done->user_cpu_seconds + done->system_cpu_seconds : 0,
                   outcome.failure == StepFailure::kNone, outcome.failure};
  if (!step.ok) {
    record_failure("link", done, outcome);
    if (result_.diagnostics.empty() && done != nullptr) {
      result_.diagnostics = "link: " + filtered(done->err).substr(0, 400);
    }
  } else {
    // Into the cache by an atomic rename, so a concurrent build never loads half a module; a
    // failure only costs the next build its link.
    const std::string temp = temporary_sibling(cached);
    std::error_code ignored;
    if (fs::copy_file(result_.module_path, temp, fs::copy_options::overwrite_existing, ignored)) {
      fs::rename(temp, cached, ignored);
    }
    fs::remove(temp, ignored);
  }
  result_.steps.push_back(step);
}

Result<BuildResult> Builder::run(const std::string& out_dir) {
  if (Status status = prepare(out_dir); !status) return status;
  plan_jobs();
  const std::size_t sources = jobs_.size() - 1;  // binding.cpp is ours
  if (sources > options_.limits.max_sources) {
    result_.failure = StepFailure::kResource;
    result_.reason = std::to_string(sources) + " translation units in kernels/, limit " +
                     std::to_string(options_.limits.max_sources);
    result_.diagnostics = result_.reason + "\n";
    result_.seconds = seconds_since(started_);
    return std::move(result_);
  }
  const auto header_start = BuildClock::now();
  if (Status status = precompile_header(); !status) return status;
  const double header_seconds = seconds_since(header_start);
  started_ = BuildClock::now();  // the budget's clock starts with the candidate's own compiles
  compile_all();
  if (!machinery_) return machinery_;
  result_.ok = std::all_of(result_.steps.begin(), result_.steps.end(),
                           [](const CompileStep& step) { return step.ok; });
  if (result_.ok) {
    link(out_dir);
    if (!machinery_) return machinery_;
    result_.ok = result_.steps.back().ok;
  }
  if (!result_.ok && result_.failure == StepFailure::kNone) result_.failure = StepFailure::kCompile;
  if (!result_.ok) result_.module_path.clear();
  result_.cpu_seconds = budget_.cpu_used();
  result_.seconds = seconds_since(started_) + header_seconds;
  return std::move(result_);
}

}  // namespace

std::vector<std::string> public_header_roots(const TorchEnv& torch) {
  std::vector<std::string> roots = torch.include_paths;
  for (const char* root : {"/usr/include", "/usr/lib/gcc", "/usr/local/cuda", "/usr/local/include"}) {
    roots.emplace_back(root);
  }
  return roots;
}

Result<BuildResult> build_extension(const std::string& workspace_dir, const std::string& out_dir,
                                    const TorchEnv& torch, const BuildOptions& options) {
  Builder builder(workspace_dir, torch, options);
  return builder.run(out_dir);
}

}  // namespace cudaagent
