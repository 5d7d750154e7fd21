// The verifier: one candidate in, one verdict out (DESIGN.md §4–5). The trusted side (this code)
// snapshots the candidate, builds it, runs the pristine reference in its own process with a private
// seed, runs the candidate in another, sandboxed process, and compares the outputs itself. Nothing
// the candidate process says can raise a verdict: its report can only lower one.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "cudaagent/extension_build.h"
#include "cudaagent/session.h"
#include "cudaagent/status.h"
#include "cudaagent/tensor_compare.h"
#include "cudaagent/torch_env.h"
#include "cudaagent/verdict.h"

namespace cudaagent {

struct VerifySettings {
  std::string device = "cuda";    // "cuda", or "cpu" for CPU tasks whose kernels are plain C++
  int checks = 5;                 // fresh input sets
  CompareOptions compare;         // atol = rtol = 1e-2 by default
  std::string python;             // interpreter; empty: the first python3 that imports torch
  std::string cache_dir;          // torch discovery, objects, precompiled headers
  BuildOptions build;
  double reference_timeout_seconds = 600;
  double candidate_timeout_seconds = 300;
  std::string policy_path;        // allowed ATen ops; empty: share/harness/policy.json
  std::string scratch_dir = "/tmp";  // job directories are created (0700) and removed here
  bool keep_job_dirs = false;     // for debugging the harness
  // Runs a child process in the OS sandbox: it may read `readable` (besides the system and the
  // harness) and write only `writable`. Not set: processes run unsandboxed (the tool refuses that
  // unless the user asks for it).
  std::function<Result<ProcessResult>(const ProcessSpec&, const std::vector<std::string>& readable,
                                      const std::vector<std::string>& writable)>
      sandbox;
  std::string sandbox_summary = "none";
};

// A candidate to verify. Either a workspace directory or a files map; the reference source always
// comes separately (pristine), never from the candidate.
struct VerifyRequest {
  std::string id;
  std::string model_py;                        // the pristine reference
  std::string workspace_dir;                   // or:
  std::map<std::string, std::string> files;    // relative name -> bytes
};

struct VerifyOutcome {
  Verdict verdict = Verdict::kInfraError;
  std::string reason;
  std::string json;  // the value of the record's "verify" key
};

class Verifier {
 public:
  // Finds torch for settings.python (discovery cached in settings.cache_dir). A Status when no
  // usable Python with torch exists: nothing can be verified.
  static Result<Verifier> create(VerifySettings settings);

  // Verifies one candidate. Every failure of the candidate is a verdict; INFRA_ERROR when the
  // machinery failed (the reference crashed, the sandbox could not start, disk full). A Status only
  // when the request itself is unusable (the workspace directory cannot be read).
  Result<VerifyOutcome> verify(const VerifyRequest& request) const;

  const TorchEnv& torch() const { return torch_; }

 private:
  Verifier(VerifySettings settings, TorchEnv torch)
      : settings_(std::move(settings)), torch_(std::move(torch)) {}
  VerifySettings settings_;
  TorchEnv torch_;
};

}  // namespace cudaagent
