// The verifier: one candidate in, one verdict out (cudaagent(7), SANDBOX and VERDICTS). The
// trusted side (this code) snapshots the candidate, applies the static policies (the snapshot's and
// model_new.py's, candidate/static_policy.h), builds it, and makes its checks through the task's evaluation
// session (evaluation/evaluator.h): each check is a call on fresh inputs from a private seed,
// judged by the session's owner against the pristine reference. Nothing the candidate's process
// says can raise a verdict: its account can only lower one. The judgement itself is decision.h, a
// pure function of the facts gathered here.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cudaagent/base/status.h"
#include "cudaagent/candidate/extension_build.h"
#include "cudaagent/candidate/static_policy.h"
#include "cudaagent/evaluation/evaluator.h"
#include "cudaagent/records/result_store.h"
#include "cudaagent/records/verdict.h"
#include "cudaagent/sandbox/runner.h"
#include "cudaagent/sandbox/torch_env.h"

namespace cudaagent {

struct VerifySettings {
  std::string device = "cuda";    // "cuda", or "cpu" for CPU tasks whose kernels are plain C++
  int checks = 5;                 // calls on fresh inputs
  double atol = 1e-2;             // tolerances (man/cudaagent-verify.1, CORRECTNESS)
  double rtol = 1e-2;
  std::string python;             // interpreter; empty: the first python3 that imports torch
  std::string cache_dir;          // torch discovery, objects, precompiled headers
  BuildOptions build;
  double load_timeout_seconds = 600;  // the task's session, a runner's start
  double call_timeout_seconds = 60;   // one call
  std::string policy_path;        // allowed ATen ops; empty: share/harness/policy.json
  // The static check of model_new.py (python_policy.h). Off only to test the layers beneath it
  // (the attack catalog does); never for rewards.
  bool python_policy = true;
  std::string scratch_dir = "/tmp";  // the session's private root is created (0700) and removed here
  bool keep_job_dirs = false;     // for debugging the harness
  // Wraps a process in the OS sandbox. Not set: processes run unsandboxed (the tool refuses that
  // unless the user asks for it).
  SandboxWrapper sandbox;
  std::string sandbox_summary = "none";
  std::optional<ProcessCredentials> candidate_user;  // see EvaluationSettings
  // See EvaluationSettings. Profile's too, or the candidate could tell a check from a timed call.
  std::string call_timer = "auto";
  double call_lead_us = kAutoCallLead;  // the same: a check and a timed call wait alike
  std::string forward_sync = "auto";  // the same (EvaluationSettings), a check waits as a timed call
  const std::atomic<int>* stop = nullptr;            // see EvaluationSettings
  // Waiting for the device lock (device_lock.h) that a check on the GPU takes, as profile's rounds
  // do: a check run beside another job's timed calls would be inside their windows.
  double lock_timeout_seconds = 3600;
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
  // Finds torch for settings.python (discovery cached in settings.cache_dir) and prepares the
  // evaluation session's root. A Status when no usable Python with torch exists.
  static Result<Verifier> create(VerifySettings settings);

  Verifier(Verifier&&) noexcept;
  Verifier& operator=(Verifier&&) noexcept;
  ~Verifier();

  // Verifies one candidate. Every failure of the candidate is a verdict; INFRA_ERROR when the
  // machinery failed (the task does not load, the sandbox cannot start, disk full). A Status only
  // when the request itself is unusable (the workspace directory cannot be read).
  Result<VerifyOutcome> verify(const VerifyRequest& request);

  // Starts the session's workers now, so the first candidate is not charged for it.
  void warm_up();

  // Keep verdicts in `store` (not owned; null: none), keyed by job_key(): a candidate whose key
  // is stored is not run again, its stored verdict is returned with "store": {"hit": true}.
  // INFRA_ERROR is never stored (the machinery failed, not the candidate).
  void use_store(ResultStore* store) { store_ = store; }

  // The content key of a verification: the pristine task, the candidate's snapshot hash, and
  // everything else the verdict depends on (rules, harness scripts, policy, model_new.py's
  // static policy, device, GPU, torch, tolerances, checks, architecture).
  std::string job_key(const std::string& model_py, const std::string& snapshot_hash) const;

  const TorchEnv& torch() const { return torch_; }
  // The session the checks run in (an agent loop may time the same candidate in it).
  Evaluator& evaluator() { return *evaluator_; }

 private:
  Verifier(VerifySettings settings, TorchEnv torch, std::unique_ptr<Evaluator> evaluator);
  VerifySettings settings_;
  TorchEnv torch_;
  std::unique_ptr<Evaluator> evaluator_;
  ResultStore* store_ = nullptr;
  std::uint64_t jobs_ = 0;
  std::string lock_name_;  // the device's lock, named at the first check on a GPU
  StaticPolicy policy_;  // the static policies, shared with profile (candidate/static_policy.h)
};

}  // namespace cudaagent
