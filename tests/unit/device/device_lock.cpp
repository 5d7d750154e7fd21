// DeviceLock and the GPU queries' pure parts: one holder at a time, a timed-out wait says who
// holds it, release on destruction; device names and nvidia-smi lines.
#include "cudaagent/device/device_lock.h"

#include <doctest/doctest.h>

#include "cudaagent/device/gpu_query.h"
#include "stop_support.h"
#include "test_support.h"

namespace cudaagent {
namespace {

TEST_CASE("a device lock has one holder; the next waits, gives up with a message, then gets it") {
  testing::TempDir dir;
  auto first = DeviceLock::acquire(dir.file("locks"), "gpu-0", 1);
  REQUIRE_MESSAGE(first, first.status().message());
  std::string told;
  auto second = DeviceLock::acquire(dir.file("locks"), "gpu-0", 0.2, [&](const std::string& m) { told = m; });
  REQUIRE_FALSE(second);
  CHECK(second.status().message().find("held by another timing job") != std::string::npos);
  CHECK(told.find("waiting for") != std::string::npos);
  auto other = DeviceLock::acquire(dir.file("locks"), "gpu-1", 0.2);
  CHECK(other);  // another device is another lock
  { DeviceLock released = std::move(first).value(); }
  auto third = DeviceLock::acquire(dir.file("locks"), "gpu-0", 1);
  CHECK(third);
}

TEST_CASE("a wait for a busy lock ends on a stop request (issue 16)") {
  testing::TempDir dir;
  auto holder = DeviceLock::acquire(dir.file("locks"), "gpu-0", 1);
  REQUIRE(holder);
  std::atomic<int> stop{0};
  testing::write_file(dir.file("now"), "");
  Result<DeviceLock> waiter = Status::error("not run");
  {
    testing::StopWhenFileAppears stopper(stop, dir.file("now"));
    waiter = DeviceLock::acquire(dir.file("locks"), "gpu-0", 3600, {}, &stop);
  }
  REQUIRE_FALSE(waiter);
  CHECK(waiter.status().message().find("stopped by signal 15 while waiting for") == 0);
}

TEST_CASE("this process's device lock is named once and shared by every job that asks for it") {
  // verify's GPU checks and profile's rounds both come here: one lock file under cache_dir/locks.
  testing::TempDir dir;
  std::string name;
  auto held = lock_this_device(dir.path().string(), "cpu", name, 1);
  REQUIRE_MESSAGE(held, held.status().message());
  CHECK(name == "cpu");
  CHECK(held.value().path() == dir.file("locks") + "/cpu.lock");
  std::string again = name;
  auto busy = lock_this_device(dir.path().string(), "cpu", again, 0.2);
  CHECK_FALSE(busy);  // another job of the machine waits while the first holds it
  { DeviceLock released = std::move(held).value(); }
  CHECK(lock_this_device(dir.path().string(), "cpu", again, 1));
}

TEST_CASE("a GPU's lock is named by its UUID, whatever index a process knows it by") {
  // Two processes that see the same physical GPU as different indices (a Slurm job sees its GPU
  // as 0) take the same lock.
  auto uuids = [](const std::string& index) -> Result<std::string> {
    if (index == "0" || index == "3") return std::string("GPU-dcbc3e3b");
    return Status::error("no such device");
  };
  CHECK(device_lock_name("cpu", "3", uuids) == "cpu");
  CHECK(device_lock_name("cuda", "0", uuids) == device_lock_name("cuda", "3", uuids));
  CHECK(device_lock_name("cuda", "0", uuids) == "gpu-GPU-dcbc3e3b");
  std::string note;
  CHECK(device_lock_name("cuda", "7", uuids, &note) == "gpu-index-7");
  CHECK(note.find("no such device") != std::string::npos);
  CHECK(device_lock_name("cuda", "GPU-1a2b/../x", {}) == "gpu-index-GPU-1a2b____x");
  CHECK(query_gpu_uuid("GPU-1a2b").value() == "GPU-1a2b");  // a UUID needs no nvidia-smi
  CHECK(visible_gpu_index(nullptr) == "0");
  CHECK(visible_gpu_index("2,5") == "2");
}

TEST_CASE("nvidia-smi's CSV line parses, and anything else is refused") {
  auto reading = parse_gpu_reading("NVIDIA H200, 570.124.06, P0, 1980, 3201, 34\n");
  REQUIRE_MESSAGE(reading, reading.status().message());
  CHECK(reading.value().name == "NVIDIA H200");
  CHECK(reading.value().driver == "570.124.06");
  CHECK(reading.value().pstate == "P0");
  CHECK(reading.value().sm_mhz == 1980);
  CHECK(reading.value().memory_mhz == 3201);
  CHECK(reading.value().temperature_c == 34);
  reading = parse_gpu_reading("NVIDIA H200, 570, P0, [N/A], 3201, 34");
  REQUIRE(reading);
  CHECK(reading.value().sm_mhz == 0);
  CHECK_FALSE(parse_gpu_reading(""));
  CHECK_FALSE(parse_gpu_reading("a, b, c"));
  CHECK_FALSE(parse_gpu_reading("a, b, c, 1, 2, 3\nd, e, f, 4, 5, 6"));
}

}  // namespace
}  // namespace cudaagent
