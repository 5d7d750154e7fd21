#include "reference.h"

#include <chrono>
#include <random>

#include "cudaagent/base/session.h"
#include "cudaagent/base/sha256.h"

namespace cudaagent {
namespace {

std::uint64_t private_seed() {
  std::random_device device;  // /dev/urandom: nothing the candidate can predict or observe
  return (static_cast<std::uint64_t>(device()) << 32 | device()) & ((1ull << 62) - 1);
}

}  // namespace

ReferenceJob::ReferenceJob(std::string task_hash, const ReferenceJobSpec& spec)
    : task_hash_(std::move(task_hash)),
      out_dir_(spec.out_dir),
      remove_task_(spec.task_dir, spec.keep_dirs),
      remove_out_(spec.out_dir, spec.keep_dirs) {}

ReferenceJob::~ReferenceJob() {
  if (future_.valid()) future_.wait();
}

Result<std::unique_ptr<ReferenceJob>> ReferenceJob::start(HarnessWorker& worker, const ReferenceJobSpec& spec) {
  std::unique_ptr<ReferenceJob> job(new ReferenceJob(sha256_hex(spec.model_py), spec));
  if (!make_directories(spec.task_dir) || !make_directories(job->made_dir()) ||
      !make_directories(job->expect_dir()) || !write_file_atomically(spec.task_dir + "/model.py", spec.model_py)) {
    return Status::error("cannot prepare the reference's directories " + cudaagent::quoted(spec.task_dir) +
                         " and " + cudaagent::quoted(spec.out_dir));
  }
  HarnessJob run;
  run.script = spec.harness_dir + "/reference.py";
  run.args = {"--task", spec.task_dir + "/model.py", "--out", job->made_dir(), "--private",
              job->expect_dir(), "--checks", std::to_string(spec.checks), "--device", spec.device};
  run.stdin_data = std::to_string(private_seed()) + "\n";
  run.timeout_seconds = spec.timeout_seconds;
  run.limits.file_size_bytes = std::uint64_t{8} << 30;
  job->future_ = std::async(std::launch::async, [&worker, run = std::move(run)] {
    ReferenceRun out;
    out.warm_wait = worker.warm_up();
    if (!out.warm_wait) return out;
    const auto start = std::chrono::steady_clock::now();
    out.run = worker.run(run);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  });
  return job;
}

}  // namespace cudaagent
