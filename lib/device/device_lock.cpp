// DeviceLock: the device's lock file under the cache directory, through FileLock's bounded wait.
#include "cudaagent/device/device_lock.h"

#include <cctype>
#include <cstdlib>
#include <utility>

#include "cudaagent/base/files.h"
#include "cudaagent/base/session.h"
#include "cudaagent/device/gpu_query.h"

namespace cudaagent {

Result<DeviceLock> DeviceLock::acquire(const std::string& dir, const std::string& name,
                                       double timeout_seconds,
                                       const std::function<void(const std::string&)>& waiting,
                                       const std::atomic<int>* stop) {
  if (!make_directories(dir)) return Status::error("cannot create " + quoted(dir));
  const std::string path = dir + "/" + name + ".lock";
  const auto busy = [&] {
    if (waiting) waiting("waiting for " + quoted(path) + " (another timing job holds the device)");
  };
  auto lock = FileLock::acquire(path, timeout_seconds, "another timing job", busy, stop);
  if (!lock) return lock.status();
  return DeviceLock(std::move(lock).value());
}

std::string device_lock_name(const std::string& device, const std::string& gpu_index,
                             const std::function<Result<std::string>(const std::string&)>& uuid_of,
                             std::string* note) {
  if (device != "cuda") return "cpu";
  auto safe = [](const std::string& text) {
    std::string out;
    for (char c : text) out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_');
    return out.substr(0, 80);
  };
  auto uuid = uuid_of ? uuid_of(gpu_index) : Result<std::string>(Status::error("no UUID lookup"));
  if (uuid) return "gpu-" + safe(uuid.value());
  if (note != nullptr) {
    *note = "the GPU lock falls back to the device index " + gpu_index + ": " + uuid.status().message();
  }
  return "gpu-index-" + safe(gpu_index.empty() ? "0" : gpu_index);
}

Result<DeviceLock> lock_this_device(const std::string& cache_dir, const std::string& device, std::string& name,
                                    double timeout_seconds, const std::function<void(const std::string&)>& log,
                                    const std::atomic<int>* stop) {
  if (name.empty()) {
    std::string note;
    name = device_lock_name(device, visible_gpu_index(std::getenv("CUDA_VISIBLE_DEVICES")),
                            [](const std::string& index) { return query_gpu_uuid(index); }, &note);
    if (!note.empty() && log) log(note);
  }
  return DeviceLock::acquire(cache_dir + "/locks", name, timeout_seconds, log, stop);
}

}  // namespace cudaagent
