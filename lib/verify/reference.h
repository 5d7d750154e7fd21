// The reference's part of one verification: a fresh child of the reference worker runs the
// pristine model.py (share/harness/reference.py), draws every input from a private seed and writes
// the expected outputs. It needs nothing of the candidate's, so it runs while the candidate builds;
// with prefetching (VerifySettings::prefetch_reference) the next one runs while the agent edits,
// and the next candidate of the same task finds its reference done. A prefetched reference is as
// fresh as one made on demand: its seed and outputs are private until a candidate is given them.
#pragma once

#include <future>
#include <memory>
#include <string>

#include "cudaagent/base/files.h"
#include "cudaagent/base/status.h"
#include "cudaagent/sandbox/harness_worker.h"

namespace cudaagent {

struct ReferenceRun {
  Result<double> warm_wait = 0.0;  // seconds spent starting the worker
  Result<ProcessResult> run = Status::error("not run");
  double seconds = 0;
};

struct ReferenceJobSpec {
  std::string model_py;     // the pristine task
  std::string task_dir;     // made here, holds model.py (read-only to the reference's sandbox)
  std::string out_dir;      // made here: ref/ (for the candidate) and expect/ (private)
  std::string harness_dir;  // share/harness
  std::string device;
  int checks = 5;
  double timeout_seconds = 600;
  bool keep_dirs = false;
};

class ReferenceJob {
 public:
  // Makes the directories and starts the run on a thread. `worker` must outlive the job and take
  // no other job until this one has been waited for (or destroyed).
  static Result<std::unique_ptr<ReferenceJob>> start(HarnessWorker& worker, const ReferenceJobSpec& spec);
  ReferenceJob(const ReferenceJob&) = delete;
  ReferenceJob& operator=(const ReferenceJob&) = delete;
  ~ReferenceJob();  // waits for the run, then removes the directories (unless kept)

  // The run's result; call once.
  ReferenceRun wait() { return future_.get(); }
  const std::string& task_hash() const { return task_hash_; }  // sha256 of model.py's bytes
  std::string made_dir() const { return out_dir_ + "/ref"; }
  std::string expect_dir() const { return out_dir_ + "/expect"; }

 private:
  ReferenceJob(std::string task_hash, const ReferenceJobSpec& spec);
  std::string task_hash_, out_dir_;
  RemovedTree remove_task_, remove_out_;
  std::future<ReferenceRun> future_;  // last: destroyed (waited for) before the directories go
};

}  // namespace cudaagent
