// Tests of the injection library's parts that need no GPU: CUPTI records formatted as trace lines
// and read back by the real reader, the correlation table, and the stack walk that finds the
// launching object through a fake CUDA runtime (fake_launcher.c -> fake_cudart.c -> this file).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <limits.h>
#include <stdlib.h>

#include <cstring>
#include <string>

#include "activity_json.h"
#include "correlation_table.h"
#include "cudaagent/profile/kernel_trace.h"
#include "launcher_resolver.h"

using namespace cudaagent;
using namespace cudaagent::cupti;

namespace {

CUpti_ActivityKernel10 make_kernel(const char* name) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = 13;
  k.correlationId = 77;
  k.start = 5000;
  k.end = 7500;
  k.gridX = 64;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 2048;
  k.registersPerThread = 32;
  return k;
}

}  // namespace

TEST_CASE("cupti records: kernel, memcpy and memset lines read back through the reader") {
  std::string text;
  const auto kernel = make_kernel("_Z9bias_reluPKfS0_Pfi");
  append_kernel_line(text, kernel, demangle(kernel.name), {"/ws/build/bias_relu.so", 4321}, 1000);

  CUpti_ActivityMemcpy6 copy;
  std::memset(&copy, 0, sizeof copy);
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.bytes = 1 << 20;
  copy.streamId = 7;
  copy.correlationId = 78;
  copy.start = 8000;
  copy.end = 9000;
  append_memcpy_line(text, copy, {}, 1000);

  CUpti_ActivityMemset4 set;
  std::memset(&set, 0, sizeof set);
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.bytes = 64;
  set.streamId = 7;
  set.correlationId = 79;
  set.start = 9500;
  set.end = 9600;
  append_memset_line(text, set, {"/x/torch/lib/libtorch_cuda.so", 0}, 1000);

  TraceCounters counters;
  counters.kernels = 1;
  counters.memcpys = 1;
  counters.memsets = 1;
  counters.dropped = 3;
  counters.launches = 3;
  counters.unknown_launchers = 1;
  TraceSettings settings;
  settings.pid = 99;
  settings.flush = 1;
  settings.cupti_library = "/usr/local/cuda/lib64/libcupti.so.13";
  append_summary_line(text, counters, settings);
  append_error_line(text, 99, "a message with \"quotes\" and \xff invalid UTF-8");
  append_mark_line(text, 99, 80, 13, 7000);

  const KernelTrace trace = parse_kernel_trace(text);
  INFO(text);
  CHECK(trace.rejected == 0);
  REQUIRE(trace.activities.size() == 3);
  const TraceActivity& k = trace.activities[0];
  CHECK(trace.names[k.name] == "_Z9bias_reluPKfS0_Pfi");
  CHECK(trace.demangled[k.name] == "bias_relu(float const*, float const*, float*, int)");
  CHECK(k.stream == 13);
  CHECK(k.correlation == 77);
  CHECK(k.start_ns == 4000);  // the clock offset is subtracted
  CHECK(k.end_ns == 6500);
  CHECK(k.grid == std::array<std::int64_t, 3>{64, 2, 1});
  CHECK(k.block == std::array<std::int64_t, 3>{256, 1, 1});
  CHECK(k.tid == 4321);
  CHECK(trace.launchers[k.launcher] == "/ws/build/bias_relu.so");
  CHECK(trace.names[trace.activities[1].name] == "[memcpy HtoD]");
  CHECK(trace.activities[1].bytes == 1 << 20);
  CHECK(trace.activities[1].launcher == kNoLauncher);
  CHECK(trace.activities[1].tid == 0);
  CHECK(trace.activities[2].kind == TraceKind::memset);
  CHECK(trace.launchers[trace.activities[2].launcher] == "/x/torch/lib/libtorch_cuda.so");
  REQUIRE(trace.summaries.size() == 1);
  CHECK(trace.summaries[0].pid == 99);
  CHECK(trace.summaries[0].dropped == 3);
  CHECK(trace.summaries[0].memsets == 1);
  CHECK(trace.summaries[0].provenance);
  CHECK(trace_losses(trace).missing == 0);
  REQUIRE(trace.errors.size() == 1);
  CHECK(trace.errors[0].find("\"quotes\"") != std::string::npos);
  REQUIRE(trace.marks.size() == 1);
  CHECK(trace.marks[0].pid == 99);
  CHECK(trace.marks[0].correlation == 80);
  CHECK(trace.marks[0].stream == 13);
  CHECK(trace.marks[0].at_ns == 7000);
}

TEST_CASE("cupti records: a record without timestamps stays visibly invalid") {
  std::string text;
  auto kernel = make_kernel("_Z1kv");
  kernel.start = 0;
  kernel.end = 0;
  append_kernel_line(text, kernel, "k()", {}, 1000);
  const KernelTrace trace = parse_kernel_trace(text);
  CHECK(trace.activities.empty());
  REQUIRE(trace.problems.size() == 1);
  CHECK(trace.problems[0].reason.find("no start time") != std::string::npos);
}

TEST_CASE("cupti records: names") {
  CHECK(demangle("_ZN2at6native4fillEv") == "at::native::fill()");
  CHECK(demangle("nvjet_hsh_128x256") == "nvjet_hsh_128x256");  // not mangled: kept
  CHECK(demangle(nullptr).empty());
  CHECK(std::string(memcpy_kind_name(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD)) == "DtoD");
  CHECK(std::string(memcpy_kind_name(200)) == "unknown");
}

TEST_CASE("correlation table: entries by id, reused slots read as unknown") {
  CorrelationTable table;
  REQUIRE(table.usable());
  CHECK_FALSE(table.get(5).has_value());
  table.put(5, {3, 1234});
  auto entry = table.get(5);
  REQUIRE(entry.has_value());
  CHECK(entry->launcher == 3);
  CHECK(entry->tid == 1234);
  table.put(0, {9, 9});  // id 0 is never stored
  CHECK_FALSE(table.get(0).has_value());
  // The slot of id 5 taken by a much later launch: id 5 is unknown, never the later launcher.
  const auto later = static_cast<std::uint32_t>(5 + CorrelationTable::kSlots);
  table.put(later, {4, 99});
  CHECK_FALSE(table.get(5).has_value());
  REQUIRE(table.get(later).has_value());
  CHECK(table.get(later)->launcher == 4);
}

TEST_CASE("launcher resolver: CUDA machinery names") {
  CHECK(is_cuda_machinery("libcuda.so.1"));
  CHECK(is_cuda_machinery("libcuda.so.580.159"));
  CHECK(is_cuda_machinery("libcudart.so.13"));
  CHECK(is_cuda_machinery("libcudart-9a3c8e1f.so.12"));
  CHECK(is_cuda_machinery("libcupti.so.2025.3.1"));
  CHECK_FALSE(is_cuda_machinery("libcudnn.so.9"));
  CHECK_FALSE(is_cuda_machinery("libcublasLt.so.13"));
  CHECK_FALSE(is_cuda_machinery("libcuda_ext.so"));
}

namespace {

struct WalkResult {
  LauncherResolver* resolver;
  std::uint32_t id = 0;
};

// Plays the CUPTI callback: called from inside "libcudart", it asks who launched.
extern "C" int resolve_from_callback(void* argument) {
  auto* result = static_cast<WalkResult*>(argument);
  result->id = result->resolver->resolve();
  return 1;
}

}  // namespace

TEST_CASE("launcher resolver: the first frame outside the runtime and ourselves") {
  void* launcher_library = ::dlopen(CUDAAGENT_FAKE_LAUNCHER, RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(launcher_library != nullptr, ::dlerror());
  using Launch = int (*)(int (*)(void*), void*);
  auto launch = reinterpret_cast<Launch>(::dlsym(launcher_library, "fake_launch"));
  const bool found = launch != nullptr;
  REQUIRE(found);

  // This test program plays the injection library: its frames are skipped as well.
  LauncherResolver resolver(reinterpret_cast<const void*>(&resolve_from_callback));
  WalkResult first{&resolver};
  CHECK(launch(resolve_from_callback, &first) == 1);
  REQUIRE(first.id != 0);
  char expected[PATH_MAX];
  REQUIRE(::realpath(CUDAAGENT_FAKE_LAUNCHER, expected) != nullptr);
  CHECK(resolver.path(first.id) == expected);

  // Again, from the caches: the same id, one object, two walks.
  WalkResult second{&resolver};
  CHECK(launch(resolve_from_callback, &second) == 1);
  CHECK(second.id == first.id);
  const auto stats = resolver.stats();
  CHECK(stats.walks == 2);
  CHECK(stats.objects == 1);
  CHECK(stats.unresolved == 0);
  CHECK(resolver.path(0).empty());
  CHECK(resolver.path(first.id + 100).empty());
}
