// cudaagent-verify as a library: options, flags, and the two input modes: workspace directories
// given on the command line, or JSONL candidate records (a task's pristine model.py plus a files
// map or a workspace path), each answered with a record carrying a "verify" key.
#pragma once

#include <functional>

#include "cudaagent/cuda/nvrtc_check.h"
#include "cudaagent/records/cli.h"
#include "cudaagent/verify/verify.h"

namespace cudaagent {

struct VerifyOptions {
  CommonOptions common;
  VerifySettings settings;
  std::string task;               // --task: the pristine model.py for workspace mode
  bool allow_unsandboxed = false; // run untrusted code without the OS sandbox minimum
  bool no_sandbox = false;        // do not even try the sandbox (trusted code, debugging)
  std::string bwrap = "bwrap";
  bool check = false;             // --check: NVRTC diagnostics only, nothing is run
  bool no_python_policy = false;  // skip model_new.py's static check (testing the layers beneath)
  std::string candidate_user = "auto";  // --candidate-user
  // The NVRTC checker (lib/cuda); the tool sets it when built with the CUDA Toolkit.
  std::function<Result<std::vector<CudaFileCheck>>(const std::map<std::string, std::string>&,
                                                   const NvrtcCheckOptions&)>
      cuda_check;
};

void add_verify_flags(CLI::App& app, VerifyOptions& options);

// Verifies every input. Workspace mode when the inputs are directories, JSONL otherwise (mixing
// them is a usage error). Exit semantics as run_record_stage.
Result<StageEnd> run_verify(VerifyOptions& options, Session& session);

}  // namespace cudaagent
