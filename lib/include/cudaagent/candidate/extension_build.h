// Builds a candidate's torch extension from a materialised workspace: nvcc for kernels/*.cu, the
// host compiler for kernels/*.cpp (CPU kernels), kernels/*_binding.cpp and the pristine binding.cpp,
// linked into one module. Objects are cached by the content hash of source + headers + flags +
// toolchain, so an edit to one kernel recompiles one file; torch/extension.h is precompiled once per
// toolchain and torch, which is most of a binding's compile time. Every compiler command runs under
// BuildLimits and the build under its budget; what the compilers print reaches the result only
// through filter_compiler_output (build_diagnostics.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/candidate/build_diagnostics.h"
#include "cudaagent/candidate/build_limits.h"
#include "cudaagent/sandbox/process.h"
#include "cudaagent/sandbox/torch_env.h"

namespace cudaagent {

struct BuildOptions {
  std::string module_name = "cuda_extension";  // the name model_new.py imports
  bool cuda = true;                  // compile kernels/*.cu with nvcc and link CUDA libraries
  std::string cuda_arch;             // "90"; empty: the TorchEnv's GPU, else 90
  std::string nvcc = "nvcc";         // resolved in PATH, then /usr/local/cuda/bin
  std::string cxx = "g++";
  // The host compiler's -O level for the candidate's C++ (kernels/*.cpp, the bindings); nvcc's
  // device and host code keep -O3. 2 is what torch's own extension builds use; 1 compiles a file
  // in about two thirds of the time (torch's headers instantiate the same templates either way),
  // for tests and CPU development loops where the C++ is not what is timed. 0 is quicker still
  // but emits every inline function of torch's headers: objects eight times the size, slower to
  // read for the object policy than the compile saved.
  int host_optimization = 2;
  std::string cache_dir;             // objects and precompiled headers; empty: no caching
  int jobs = 2;                      // compiles in parallel
  BuildLimits limits;                // per compiler process and for the whole build
  std::size_t log_cap_bytes = 256 * 1024;
  // Runs every compiler command (in the OS sandbox); run_process when not set.
  std::function<Result<ProcessResult>(const ProcessSpec&)> runner;
};

struct CompileStep {
  std::string source;      // relative to the workspace: "kernels/a.cu", "binding.cpp", "(link)"
  std::string tool;        // "nvcc", "g++"
  std::string object;      // the object file (absolute, in the cache) when ok; empty for the link
  bool cached = false;     // the object (for the link: the module) came from the cache
  double seconds = 0;
  double cpu_seconds = 0;  // user + system of the command and the children it waited for
  bool ok = false;
  StepFailure failure = StepFailure::kNone;
};

struct BuildResult {
  bool ok = false;
  // Why it failed, when !ok: kCompile (FAIL_COMPILE) or kResource (FAIL_RESOURCE: a compiler hit a
  // limit, the build budget was spent or there were too many sources); a resource failure of any
  // step makes the whole build kResource. `reason` says which limit, for the verdict's reason.
  StepFailure failure = StepFailure::kNone;
  std::string reason;
  std::string module_path;        // the linked module, when ok
  std::vector<CompileStep> steps;
  std::string diagnostics;        // the first errors with file:line, for the agent and the record
  std::string log;                // the filtered (capped) compiler output of failed steps
  std::string warnings;           // the first lines the compilers printed on steps that succeeded
  double seconds = 0;
  double cpu_seconds = 0;         // charged to the build budget
  // The build cache the objects and the module came from; the object policy keeps its tools'
  // output there too (object-tools/). Empty for a result not made by build_extension: no caching.
  std::string cache_dir;
  // The header folders whose code is the toolchain's, torch's or Python's (public_header_roots):
  // a line table's file anywhere else is the candidate's (object_lines.h).
  std::vector<std::string> glue_roots;
};

// Builds `workspace_dir` (which holds the snapshot and pristine binding files) into `out_dir`.
// A compile error or a limit reached is a BuildResult with ok=false (see `failure`); a Status only
// when the build machinery itself failed (no compiler, cannot write the cache, the precompiled
// torch header failed: it has no candidate input). Everything the compilers print passes through
// filter_compiler_output with the workspace's files and the toolchain's header folders as scope.
Result<BuildResult> build_extension(const std::string& workspace_dir, const std::string& out_dir,
                                    const TorchEnv& torch, const BuildOptions& options);

// The folders whose headers a diagnostic may quote the location of: torch's and Python's include
// paths, the CUDA Toolkit's, /usr/include and the compilers' own (/usr/lib/gcc, /usr/local/cuda).
std::vector<std::string> public_header_roots(const TorchEnv& torch);

}  // namespace cudaagent
