// Builds a candidate's torch extension from a materialised workspace: nvcc for kernels/*.cu, the
// host compiler for kernels/*.cpp (CPU kernels), kernels/*_binding.cpp and the pristine binding.cpp,
// linked into one module. Objects are cached by the content hash of source + headers + flags +
// toolchain, so an edit to one kernel recompiles one file; torch/extension.h is precompiled once per
// toolchain and torch, which is most of a binding's compile time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/sandbox/process.h"
#include "cudaagent/sandbox/torch_env.h"

namespace cudaagent {

struct BuildOptions {
  std::string module_name = "cuda_extension";  // the name model_new.py imports
  bool cuda = true;                  // compile kernels/*.cu with nvcc and link CUDA libraries
  std::string cuda_arch;             // "90"; empty: the TorchEnv's GPU, else 90
  std::string nvcc = "nvcc";         // resolved in PATH, then /usr/local/cuda/bin
  std::string cxx = "g++";
  std::string cache_dir;             // objects and precompiled headers; empty: no caching
  int jobs = 2;                      // compiles in parallel
  double compile_timeout_seconds = 300;
  std::size_t log_cap_bytes = 256 * 1024;
  // Runs every compiler command (in the OS sandbox); run_process when not set.
  std::function<Result<ProcessResult>(const ProcessSpec&)> runner;
};

struct CompileStep {
  std::string source;      // relative to the workspace
  std::string tool;        // "nvcc", "g++"
  bool cached = false;     // the object came from the cache
  double seconds = 0;
  bool ok = false;
};

struct BuildResult {
  bool ok = false;
  std::string module_path;        // the linked module, when ok
  std::vector<CompileStep> steps;
  std::string diagnostics;        // the first errors with file:line, for the agent and the record
  std::string log;                // the full (capped) compiler output of failed steps
  std::string warnings;           // the first lines the compilers printed on steps that succeeded
  double seconds = 0;
};

// Builds `workspace_dir` (which holds the snapshot and pristine binding files) into `out_dir`.
// A compile error is a BuildResult with ok=false (FAIL_COMPILE); a Status only when the build
// machinery itself failed (no compiler, cannot write the cache).
Result<BuildResult> build_extension(const std::string& workspace_dir, const std::string& out_dir,
                                    const TorchEnv& torch, const BuildOptions& options);

// The first `max_errors` compiler errors of `log` as "file:line: message" lines, with `strip_prefix`
// removed from paths. Understands gcc/clang ("f:12:5: error: m") and nvcc ("f(12): error: m").
std::string trim_diagnostics(const std::string& log, const std::string& strip_prefix,
                             std::size_t max_errors = 8);

}  // namespace cudaagent
