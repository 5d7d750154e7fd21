// The verifier: one candidate in, one verdict out (cudaagent(7), SANDBOX and VERDICTS). The trusted side (this code)
// snapshots the candidate, builds it, runs the pristine reference in its own process with a private
// seed, runs the candidate in another, sandboxed process, and compares the outputs itself. Nothing
// the candidate process says can raise a verdict: its report can only lower one.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "cudaagent/base/session.h"
#include "cudaagent/base/status.h"
#include "cudaagent/candidate/extension_build.h"
#include "cudaagent/candidate/tensor_compare.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/records/verdict.h"
#include "cudaagent/sandbox/harness_worker.h"
#include "cudaagent/sandbox/runner.h"
#include "cudaagent/sandbox/torch_env.h"

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
  // The static check of model_new.py (python_policy.h). Off only to test the layers beneath it
  // (the attack catalog does); never for rewards.
  bool python_policy = true;
  std::string scratch_dir = "/tmp";  // job directories are created (0700) and removed here
  bool keep_job_dirs = false;     // for debugging the harness
  // After each candidate, start the next reference of its task (fresh private seed) while the
  // agent edits: the next candidate of that task skips the wait for its reference. A candidate of
  // another task waits for it to end first, so use it where candidates of one task follow each
  // other (an agent's episode), not on mixed batches.
  bool prefetch_reference = false;
  // Wraps a process in the OS sandbox: it may read `readable` (besides the system and the
  // harness) and write only `writable`. Not set: processes run unsandboxed (the tool refuses that
  // unless the user asks for it).
  SandboxWrapper sandbox;
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

// The verifier's two warm workers and the directories they see (verify.cpp).
struct VerifyWorkers;

class Verifier {
 public:
  // Finds torch for settings.python (discovery cached in settings.cache_dir). A Status when no
  // usable Python with torch exists: nothing can be verified.
  static Result<Verifier> create(VerifySettings settings);

  Verifier(Verifier&&) noexcept;
  Verifier& operator=(Verifier&&) noexcept;
  ~Verifier();

  // Verifies one candidate. Every failure of the candidate is a verdict; INFRA_ERROR when the
  // machinery failed (the reference crashed, the sandbox could not start, disk full). A Status only
  // when the request itself is unusable (the workspace directory cannot be read).
  //
  // The reference and the candidate run in two warm workers (HarnessWorker), each in its own
  // sandbox, started at the first call and kept for the next: a fresh forked child per job, so a
  // candidate pays no interpreter start or torch import after the first.
  Result<VerifyOutcome> verify(const VerifyRequest& request);

  // Starts both workers now, so the first candidate is not charged for it; returns the seconds.
  Result<double> warm_up();

  // Keep verdicts in `store` (not owned; null: none), keyed by job_key(): a candidate whose key
  // is stored is not run again, its stored verdict is returned with "store": {"hit": true}.
  // INFRA_ERROR is never stored (the machinery failed, not the candidate).
  void use_store(ResultStore* store) { store_ = store; }

  // The content key of a verification: the pristine task, the candidate's snapshot hash, and
  // everything else the verdict depends on (rules, harness scripts, policy, device, GPU, torch,
  // tolerances, checks, architecture).
  std::string job_key(const std::string& model_py, const std::string& snapshot_hash) const;

  const TorchEnv& torch() const { return torch_; }

 private:
  Verifier(VerifySettings settings, TorchEnv torch, std::unique_ptr<VerifyWorkers> workers);
  VerifySettings settings_;
  TorchEnv torch_;
  std::unique_ptr<VerifyWorkers> workers_;
  std::string harness_hash_;  // of the harness scripts and the policy, read once
  ResultStore* store_ = nullptr;
};

}  // namespace cudaagent
