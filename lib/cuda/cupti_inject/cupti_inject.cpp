// libcudaagent_cupti.so: loaded by the CUDA driver into the candidate's process through
// CUDA_INJECTION64_PATH, it records every kernel, copy and memset on every stream with CUPTI's
// Activity API, and which shared object launched each one (a stack walk in the launch API
// callback). Key choices: CUPTI is opened at run time, not linked, so a machine without it (or a
// process where it fails) keeps running and the trace says why; timestamps are CLOCK_MONOTONIC
// through CUPTI's timestamp callback, so the harness's time.monotonic_ns() marks compare
// directly; nothing is ever dropped silently (every loss is a counter in the summary line).
//
// Environment:
//   CUDAAGENT_CUPTI_OUT         trace path (JSON Lines, appended); "%p" becomes the process id.
//                               Unset: the library does nothing but say so on stderr.
//   CUDAAGENT_CUPTI_LIBRARY     the CUPTI library to open (default: the one already loaded, e.g.
//                               torch's, else the build's toolkit copy, else libcupti.so.<major>)
//   CUDAAGENT_CUPTI_PROVENANCE  "0": no stack walks (launchers unknown; for overhead comparisons)
//
// The one global below is unavoidable: the driver calls a C entry point with no argument and the
// CUPTI callbacks carry none we could use for the buffer functions. It is never freed, since
// CUPTI's threads may call back while the process exits.
#include <cupti.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "activity_json.h"
#include "correlation_table.h"
#include "launcher_resolver.h"

#define CUDAAGENT_EXPORT extern "C" __attribute__((visibility("default")))

namespace cudaagent::cupti {
namespace {

constexpr std::size_t kBufferBytes = std::size_t{8} << 20;
constexpr std::size_t kBufferAlign = 8;
constexpr std::size_t kMaxDemangledCache = 1 << 14;
constexpr std::size_t kMarkBufferBytes = 64 << 10;

// The CUPTI functions we call, bound by dlsym.
struct CuptiApi {
  decltype(&::cuptiGetVersion) get_version = nullptr;
  decltype(&::cuptiGetResultString) get_result_string = nullptr;
  decltype(&::cuptiSubscribe) subscribe = nullptr;
  decltype(&::cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&::cuptiEnableCallback) enable_callback = nullptr;
  decltype(&::cuptiEnableDomain) enable_domain = nullptr;
  decltype(&::cuptiGetCallbackName) get_callback_name = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) register_buffers = nullptr;
  decltype(&::cuptiActivityEnable) activity_enable = nullptr;
  decltype(&::cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&::cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&::cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&::cuptiGetStreamIdEx) get_stream_id = nullptr;
  decltype(&::cuptiActivityRegisterTimestampCallback) register_timestamp = nullptr;  // optional
  // From the driver library already loaded in the process (not linked): the calling thread's
  // context, which CUPTI needs to name the legacy default stream.
  CUresult (*current_context)(CUcontext*) = nullptr;
};

struct Injection {
  CuptiApi api;
  std::string library_path;
  std::string output_path;
  std::uint32_t pid = 0;
  bool provenance = true;
  std::int64_t clock_offset_ns = 0;
  const char* clock = "monotonic";
  std::uint32_t cupti_version = 0;
  std::uint32_t callbacks = 0;
  std::unique_ptr<LauncherResolver> resolver;
  CorrelationTable table;
  std::atomic<bool> active{false};
  std::atomic<std::uint64_t> launches{0};
  // The highest correlation id a work API call has had: a mark names it, so that the reader can
  // tell the launches made before the mark from those after it.
  std::atomic<std::uint32_t> last_correlation{0};
  std::atomic<std::uint64_t> dropped{0};

  std::mutex contexts_mutex;
  std::vector<CUcontext> contexts;

  std::mutex flush_mutex;   // one flush at a time
  // Guards everything below. Never held while calling CUPTI: CUPTI may hold its own locks while
  // it calls buffer_completed, which takes this one.
  std::mutex output_mutex;
  int fd = -1;
  bool open_failed = false;

  // Marks (cudaagent_cupti_mark) under a lock of their own: a mark is made inside a timed call
  // and must never wait for a buffer being converted under output_mutex.
  std::mutex marks_mutex;
  std::string pending_marks;                            // mark lines not yet written
  // (context, stream handle) -> trace id, asked of CUPTI once per pair.
  std::map<std::pair<void*, void*>, std::uint32_t> mark_streams;
  std::uint32_t flushes = 0;
  TraceCounters counters;
  std::unordered_map<std::string, std::string> demangled;
};

Injection* g_injection = nullptr;

thread_local int t_depth = 0;               // nesting of launch API calls on this thread
thread_local std::uint32_t t_outer = 0;     // correlation id of the outermost one
thread_local std::uint32_t t_launcher = 0;  // and its launcher
thread_local std::uint32_t t_tid = 0;

std::uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

uint64_t CUPTIAPI timestamp_callback() { return monotonic_ns(); }

std::string result_text(const CuptiApi& api, CUptiResult result) {
  const char* text = nullptr;
  if (api.get_result_string != nullptr && api.get_result_string(result, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

bool write_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::uint64_t count_lines(const std::string& bytes) {
  std::uint64_t lines = 0;
  for (char c : bytes) lines += c == '\n' ? 1 : 0;
  return lines;
}

// Appends trace lines to the output; caller holds output_mutex. Lines that cannot be written are
// counted, so the next summary (if it gets through) says how many were lost.
void write_lines_locked(Injection& in, const std::string& lines) {
  if (lines.empty()) return;
  if (in.fd < 0 && !in.open_failed) {
    in.fd = ::open(in.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (in.fd < 0) {
      in.open_failed = true;
      std::fprintf(stderr, "cudaagent-cupti: cannot open '%s': %s\n", in.output_path.c_str(),
                   std::strerror(errno));
    }
  }
  if (in.fd < 0 || !write_all(in.fd, lines)) in.counters.write_failures += count_lines(lines);
}

void write_error(Injection& in, const std::string& message) {
  std::string line;
  append_error_line(line, in.pid, message);
  std::lock_guard lock(in.output_mutex);
  write_lines_locked(in, line);
}

LaunchFacts launch_facts(Injection& in, std::uint32_t correlation) {
  LaunchFacts facts;
  if (auto entry = in.table.get(correlation)) {
    facts.tid = entry->tid;
    if (in.resolver && entry->launcher != 0) facts.launcher = in.resolver->path(entry->launcher);
  }
  if (facts.launcher.empty()) ++in.counters.unknown_launchers;
  return facts;
}

const std::string& demangled_locked(Injection& in, const char* name) {
  static thread_local std::string uncached;
  const std::string key = name != nullptr ? name : "";
  if (auto it = in.demangled.find(key); it != in.demangled.end()) return it->second;
  if (in.demangled.size() >= kMaxDemangledCache) {
    uncached = demangle(name);
    return uncached;
  }
  return in.demangled.emplace(key, demangle(name)).first->second;
}

// Converts one completed buffer into lines; caller holds output_mutex.
void convert_buffer_locked(Injection& in, std::uint8_t* buffer, std::size_t valid, std::string& lines) {
  CUpti_Activity* record = nullptr;
  for (;;) {
    const CUptiResult result = in.api.next_record(buffer, valid, &record);
    if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (result != CUPTI_SUCCESS) {
      ++in.counters.buffer_errors;
      break;
    }
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        append_kernel_line(lines, *kernel, demangled_locked(in, kernel->name),
                           launch_facts(in, kernel->correlationId), in.clock_offset_ns);
        ++in.counters.kernels;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        append_memcpy_line(lines, *copy, launch_facts(in, copy->correlationId), in.clock_offset_ns);
        ++in.counters.memcpys;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* set = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        append_memset_line(lines, *set, launch_facts(in, set->correlationId), in.clock_offset_ns);
        ++in.counters.memsets;
        break;
      }
      default:
        ++in.counters.other_records;
        break;
    }
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // A null buffer makes CUPTI drop records, which it counts: the summary reports them.
  void* memory = std::aligned_alloc(kBufferAlign, kBufferBytes);
  *buffer = static_cast<uint8_t*>(memory);
  *size = memory != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t /*size*/,
                               size_t valid) {
  Injection* in = g_injection;
  if (in == nullptr) {
    std::free(buffer);
    return;
  }
  size_t dropped = 0;
  if (in->api.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS) in->dropped += dropped;
  try {
    std::lock_guard lock(in->output_mutex);
    std::string lines;
    if (buffer != nullptr && valid > 0) convert_buffer_locked(*in, buffer, valid, lines);
    write_lines_locked(*in, lines);
  } catch (...) {
    // Out of memory while formatting: the buffer's records are lost, and counted as such.
    std::lock_guard lock(in->output_mutex);
    ++in->counters.buffer_errors;
  }
  std::free(buffer);
}

std::uint32_t thread_id() {
  if (t_tid == 0) t_tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  return t_tid;
}

void on_resource(Injection& in, CUpti_CallbackId id, const CUpti_ResourceData& data) {
  if (id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    std::lock_guard lock(in.contexts_mutex);
    in.contexts.push_back(data.context);
  } else if (id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    size_t dropped = 0;
    if (in.api.dropped_records(data.context, 0, &dropped) == CUPTI_SUCCESS) in.dropped += dropped;
    std::lock_guard lock(in.contexts_mutex);
    std::erase(in.contexts, data.context);
  }
}

void CUPTIAPI on_callback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                          const void* data) {
  Injection* in = g_injection;
  if (in == nullptr || data == nullptr) return;
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
      on_resource(*in, id, *static_cast<const CUpti_ResourceData*>(data));
      return;
    }
    const auto* call = static_cast<const CUpti_CallbackData*>(data);
    if (call->callbackSite == CUPTI_API_ENTER) {
      // A runtime launch calls the driver's launch underneath: walk the stack once, at the
      // outermost call, and give both correlation ids the same launcher.
      if (t_depth++ == 0) {
        t_outer = call->correlationId;
        t_launcher = in->provenance && in->resolver ? in->resolver->resolve() : 0;
        in->launches.fetch_add(1, std::memory_order_relaxed);
      }
      in->table.put(call->correlationId, {t_launcher, thread_id()});
      std::uint32_t seen = in->last_correlation.load(std::memory_order_relaxed);
      while (seen < call->correlationId &&
             !in->last_correlation.compare_exchange_weak(seen, call->correlationId, std::memory_order_relaxed)) {
      }
    } else if (call->correlationId == t_outer) {
      t_depth = 0;  // the outermost call returned: whatever happened inside, the nest is closed
    } else if (t_depth > 0) {
      --t_depth;
    }
  } catch (...) {
    // Nothing may escape into the driver; a lost launcher shows up as unknown.
  }
}

// Launch, copy and memset API functions of both domains, found by name so that new variants in a
// later CUDA (cudaLaunchKernelExC, __cudaLaunchKernel in 13.0, ...) are caught without a list.
bool is_work_api(const char* name) {
  if (name == nullptr) return false;
  const std::string_view n(name);
  if (n.find("Node") != n.npos || n.find("HostFunc") != n.npos || n.find("GraphAdd") != n.npos ||
      n.find("GraphExec") != n.npos) {
    return false;
  }
  return n.starts_with("cuLaunch") || n.starts_with("cudaLaunch") || n.starts_with("__cudaLaunch") ||
         n.find("GraphLaunch") != n.npos || n.find("Memcpy") != n.npos || n.find("Memset") != n.npos;
}

std::uint32_t enable_work_callbacks(Injection& in, CUpti_SubscriberHandle subscriber) {
  std::uint32_t enabled = 0;
  const struct {
    CUpti_CallbackDomain domain;
    std::uint32_t size;
  } domains[] = {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE},
                 {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE}};
  for (const auto& d : domains) {
    for (std::uint32_t id = 1; id < d.size; ++id) {
      const char* name = nullptr;
      if (in.api.get_callback_name(d.domain, id, &name) != CUPTI_SUCCESS || !is_work_api(name)) continue;
      if (in.api.enable_callback(1, subscriber, d.domain, id) == CUPTI_SUCCESS) ++enabled;
    }
  }
  return enabled;
}

template <class F>
bool bind(void* library, const char* name, F& function) {
  function = reinterpret_cast<F>(::dlsym(library, name));
  return function != nullptr;
}

std::string loaded_path(void* library, const std::string& fallback) {
  link_map* map = nullptr;
  if (::dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return fallback;
}

// Opens CUPTI (see the file comment for the order); the reason in `error` when it cannot.
void* open_cupti(std::string& path, std::string& error) {
  const std::string soname = "libcupti.so." + std::to_string(CUPTI_API_VERSION / 10000);
  if (const char* chosen = std::getenv("CUDAAGENT_CUPTI_LIBRARY"); chosen != nullptr && chosen[0] != '\0') {
    void* library = ::dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) error = std::string("cannot open CUPTI '") + chosen + "': " + ::dlerror();
    path = chosen;
    return library;
  }
  std::vector<std::pair<std::string, int>> tries = {{soname, RTLD_NOW | RTLD_NOLOAD}};
#ifdef CUDAAGENT_CUPTI_BUILD_LIBRARY
  tries.emplace_back(CUDAAGENT_CUPTI_BUILD_LIBRARY, RTLD_NOW | RTLD_LOCAL);
#endif
  tries.emplace_back(soname, RTLD_NOW | RTLD_LOCAL);
  for (const auto& [name, flags] : tries) {
    if (void* library = ::dlopen(name.c_str(), flags)) {
      path = loaded_path(library, name);
      return library;
    }
    const char* reason = ::dlerror();
    if ((flags & RTLD_NOLOAD) == 0) error = "cannot open CUPTI '" + name + "': " + (reason ? reason : "unknown");
  }
  return nullptr;
}

bool bind_api(void* library, CuptiApi& api, std::string& missing) {
  const auto need = [&](const char* name, auto& fn) {
    if (!bind(library, name, fn) && missing.empty()) missing = name;
  };
  need("cuptiGetVersion", api.get_version);
  need("cuptiGetResultString", api.get_result_string);
  need("cuptiSubscribe", api.subscribe);
  need("cuptiUnsubscribe", api.unsubscribe);
  need("cuptiEnableCallback", api.enable_callback);
  need("cuptiEnableDomain", api.enable_domain);
  need("cuptiGetCallbackName", api.get_callback_name);
  need("cuptiActivityRegisterCallbacks", api.register_buffers);
  need("cuptiActivityEnable", api.activity_enable);
  need("cuptiActivityFlushAll", api.flush_all);
  need("cuptiActivityGetNextRecord", api.next_record);
  need("cuptiActivityGetNumDroppedRecords", api.dropped_records);
  need("cuptiGetTimestamp", api.get_timestamp);
  need("cuptiGetStreamIdEx", api.get_stream_id);
  bind(library, "cuptiActivityRegisterTimestampCallback", api.register_timestamp);
  if (void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) bind(driver, "cuCtxGetCurrent", api.current_context);
  return missing.empty();
}

// The trace id of a stream handle (see cudaagent_cupti_stream_id), or -1.
long long stream_id(Injection& in, void* stream) {
  // With the current context first: CUPTI cannot tell which context's default stream a null
  // handle means without one.
  CUcontext context = nullptr;
  if (in.api.current_context == nullptr || in.api.current_context(&context) != CUDA_SUCCESS) context = nullptr;
  uint32_t id = 0;
  if (context != nullptr && in.api.get_stream_id(context, static_cast<CUstream>(stream), 0, &id) == CUPTI_SUCCESS) {
    return id;
  }
  if (in.api.get_stream_id(nullptr, static_cast<CUstream>(stream), 0, &id) != CUPTI_SUCCESS) return -1;
  return id;
}

void at_exit();

// Everything InitializeInjection does; false (after an error line) when tracing cannot run.
bool start(Injection& in) {
  std::string error;
  void* library = open_cupti(in.library_path, error);
  if (library == nullptr) {
    write_error(in, error);
    return false;
  }
  std::string missing;
  if (!bind_api(library, in.api, missing)) {
    write_error(in, "CUPTI '" + in.library_path + "' lacks " + missing);
    return false;
  }
  auto& api = in.api;
  if (api.get_version(&in.cupti_version) != CUPTI_SUCCESS) in.cupti_version = 0;
  // The timestamp source must be set before any activity kind is enabled.
  CUptiResult result = CUPTI_ERROR_NOT_SUPPORTED;
  if (api.register_timestamp != nullptr) result = api.register_timestamp(timestamp_callback);
  if (result != CUPTI_SUCCESS) {
    // Older CUPTI: its own clock (CLOCK_REALTIME on Linux), shifted onto CLOCK_MONOTONIC by the
    // offset measured now; exact unless the wall clock is stepped while the process runs.
    std::uint64_t now = 0;
    const std::uint64_t before = monotonic_ns();
    if (api.get_timestamp(&now) == CUPTI_SUCCESS) {
      const std::uint64_t after = monotonic_ns();
      in.clock_offset_ns = static_cast<std::int64_t>(now) - static_cast<std::int64_t>(before + (after - before) / 2);
    }
    in.clock = "monotonic_offset";
  }
  if (in.provenance) in.resolver = std::make_unique<LauncherResolver>(reinterpret_cast<const void*>(&start));
  CUpti_SubscriberHandle subscriber = nullptr;
  result = api.subscribe(&subscriber, on_callback, nullptr);
  if (result != CUPTI_SUCCESS) {
    write_error(in, "cuptiSubscribe: " + result_text(api, result));
    return false;
  }
  in.callbacks = enable_work_callbacks(in, subscriber);
  (void)api.enable_domain(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE);
  result = api.register_buffers(buffer_requested, buffer_completed);
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET}) {
    if (result == CUPTI_SUCCESS) result = api.activity_enable(kind);
  }
  if (result != CUPTI_SUCCESS) {
    write_error(in, "enabling CUPTI activity records: " + result_text(api, result));
    (void)api.unsubscribe(subscriber);
    return false;
  }
  in.active = true;
  std::atexit(at_exit);
  return true;
}

int flush(Injection& in) {
  if (!in.active || static_cast<std::uint32_t>(::getpid()) != in.pid) return -1;
  std::lock_guard flush_lock(in.flush_mutex);
  const CUptiResult result = in.api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<CUcontext> contexts;
  {
    std::lock_guard lock(in.contexts_mutex);
    contexts = in.contexts;
  }
  size_t dropped = 0;
  if (in.api.dropped_records(nullptr, 0, &dropped) == CUPTI_SUCCESS) in.dropped += dropped;
  for (CUcontext context : contexts) {
    dropped = 0;
    if (in.api.dropped_records(context, 0, &dropped) == CUPTI_SUCCESS) in.dropped += dropped;
  }
  std::string lines;
  {
    std::lock_guard marks_lock(in.marks_mutex);
    lines.swap(in.pending_marks);
  }
  std::lock_guard lock(in.output_mutex);
  if (result != CUPTI_SUCCESS) {
    append_error_line(lines, in.pid, "cuptiActivityFlushAll: " + result_text(in.api, result));
  }
  TraceCounters counters = in.counters;
  counters.dropped = in.dropped.load();
  counters.launches = in.launches.load(std::memory_order_relaxed);
  if (in.resolver) counters.unresolved_walks = in.resolver->stats().unresolved;
  TraceSettings settings;
  settings.pid = in.pid;
  settings.flush = ++in.flushes;
  settings.provenance = in.provenance;
  settings.clock = in.clock;
  settings.cupti_version = in.cupti_version;
  settings.callbacks = in.callbacks;
  settings.cupti_library = in.library_path;
  append_summary_line(lines, counters, settings);
  const std::uint64_t failures_before = in.counters.write_failures;
  write_lines_locked(in, lines);
  if (in.fd >= 0) (void)::fsync(in.fd);
  return result == CUPTI_SUCCESS && in.counters.write_failures == failures_before ? 0 : -2;
}

void at_exit() {
  try {
    if (g_injection != nullptr) (void)flush(*g_injection);
  } catch (...) {
  }
}

std::string expand_pid(const std::string& pattern, std::uint32_t pid) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      out += std::to_string(pid);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

void initialize() {
  const char* output = std::getenv("CUDAAGENT_CUPTI_OUT");
  if (output == nullptr || output[0] == '\0') {
    std::fprintf(stderr, "cudaagent-cupti: CUDAAGENT_CUPTI_OUT is not set: not tracing\n");
    return;
  }
  auto* in = new Injection;  // never freed: see the file comment
  in->pid = static_cast<std::uint32_t>(::getpid());
  in->output_path = expand_pid(output, in->pid);
  const char* provenance = std::getenv("CUDAAGENT_CUPTI_PROVENANCE");
  in->provenance = provenance == nullptr || std::string_view(provenance) != "0";
  if (!in->table.usable()) in->provenance = false;
  g_injection = in;
  (void)start(*in);
}

}  // namespace
}  // namespace cudaagent::cupti

// Called by the CUDA driver (once per process, inside cuInit) when CUDA_INJECTION64_PATH names
// this library. Always returns 1: a failure to trace must not fail the process's CUDA.
CUDAAGENT_EXPORT int InitializeInjection(void) {
  static std::once_flag once;
  try {
    std::call_once(once, cudaagent::cupti::initialize);
  } catch (...) {
    std::fprintf(stderr, "cudaagent-cupti: initialisation failed: not tracing\n");
  }
  return 1;
}

// Delivers every record CUPTI holds (including work still running: call it after a device-wide
// synchronise) to the trace and appends a summary line. The harness calls it through ctypes at the
// end of a job, because forked job processes leave with os._exit and skip atexit; it also runs at
// exit. Returns 0 when all was written, -1 when this process is not tracing (no injection, CUPTI
// unavailable, or a forked child of the traced process), -2 when CUPTI or the write failed (the
// trace then says which, as far as it can be written). Thread-safe.
CUDAAGENT_EXPORT int cudaagent_cupti_flush(void) {
  try {
    return cudaagent::cupti::g_injection != nullptr ? cudaagent::cupti::flush(*cudaagent::cupti::g_injection)
                                                    : -1;
  } catch (...) {
    return -2;
  }
}

// The stream id the trace's "stream" fields use for a CUstream / cudaStream_t handle (0: the
// legacy default stream), so the harness can name its timed stream; -1 when not tracing or CUPTI
// does not know the handle.
CUDAAGENT_EXPORT long long cudaagent_cupti_stream_id(void* stream) {
  auto* in = cudaagent::cupti::g_injection;
  if (in == nullptr || !in->active) return -1;
  return cudaagent::cupti::stream_id(*in, stream);
}

// Marks that a forward has returned and its output is about to be copied out on `stream`: a
// "mark" line with the highest correlation id launched so far, the stream's trace id and the
// time. The reader then checks that all work launched before the mark had finished when the first
// copy after it began (work a forward left running would otherwise run past the timed window).
// The line is kept in memory and written with the next flush (or once 64 KiB are pending), so a
// mark costs the harness no system call inside a timed call. Returns 0 when kept or written, -1
// when this process is not tracing or the stream is unknown, -2 when a write failed (counted in
// the next summary). Thread-safe.
CUDAAGENT_EXPORT int cudaagent_cupti_mark(void* stream) {
  using namespace cudaagent::cupti;
  try {
    Injection* in = g_injection;
    if (in == nullptr || !in->active || static_cast<std::uint32_t>(::getpid()) != in->pid) return -1;
    // Read before anything else: the copies, launched after this returns, have higher ids.
    const std::uint32_t correlation = in->last_correlation.load(std::memory_order_relaxed);
    // The null handle names each context's own default stream, so the context is part of the key.
    CUcontext context = nullptr;
    if (in->api.current_context == nullptr || in->api.current_context(&context) != CUDA_SUCCESS) context = nullptr;
    const std::pair<void*, void*> key{context, stream};
    std::uint32_t id = 0;
    bool known = false;
    {
      std::lock_guard lock(in->marks_mutex);
      if (auto it = in->mark_streams.find(key); it != in->mark_streams.end()) {
        id = it->second;
        known = true;
      }
    }
    if (!known) {
      const long long asked = stream_id(*in, stream);
      if (asked < 0) return -1;
      id = static_cast<std::uint32_t>(asked);
      std::lock_guard lock(in->marks_mutex);
      in->mark_streams.emplace(key, id);
    }
    std::string full;
    {
      std::lock_guard lock(in->marks_mutex);
      append_mark_line(in->pending_marks, in->pid, correlation, id, monotonic_ns());
      if (in->pending_marks.size() < kMarkBufferBytes) return 0;
      full.swap(in->pending_marks);
    }
    std::lock_guard lock(in->output_mutex);
    const std::uint64_t failures_before = in->counters.write_failures;
    write_lines_locked(*in, full);
    return in->counters.write_failures == failures_before ? 0 : -2;
  } catch (...) {
    return -2;
  }
}
