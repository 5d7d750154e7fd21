// Formatting of CUPTI activity records as trace lines, through the project's JSON writer (compiled
// into the injection library, which links nothing of cudaagent_core).
#include "activity_json.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

#include "cudaagent/base/json_writer.h"

namespace cudaagent::cupti {
namespace {

std::int64_t to_clock(std::uint64_t cupti_ns, std::int64_t offset_ns) {
  // 0 means CUPTI has no timestamp (a record flushed before its work finished); keep it 0 so the
  // reader rejects it by name instead of seeing a plausible time.
  if (cupti_ns == 0) return 0;
  return static_cast<std::int64_t>(cupti_ns) - offset_ns;
}

void common_fields(JsonWriter& json, std::uint32_t device, std::uint32_t context, std::uint32_t stream,
                   std::uint32_t correlation, std::uint64_t start, std::uint64_t end,
                   std::int64_t offset) {
  json.field("device", static_cast<std::int64_t>(device))
      .field("context", static_cast<std::int64_t>(context))
      .field("stream", static_cast<std::int64_t>(stream))
      .field("correlation", static_cast<std::int64_t>(correlation))
      .field("start_ns", to_clock(start, offset))
      .field("end_ns", to_clock(end, offset));
}

void launch_fields(JsonWriter& json, const LaunchFacts& launch) {
  json.key("launcher");
  if (launch.launcher.empty()) {
    json.null();
  } else {
    json.value(launch.launcher);
  }
  json.key("tid");
  if (launch.tid == 0) {
    json.null();
  } else {
    json.value(static_cast<std::int64_t>(launch.tid));
  }
}

}  // namespace

const char* memcpy_kind_name(std::uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "unknown";
  }
}

std::string demangle(const char* mangled) {
  if (mangled == nullptr) return {};
  int status = -1;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                               std::free);
  return status == 0 && text ? std::string(text.get()) : std::string(mangled);
}

void append_kernel_line(std::string& out, const CUpti_ActivityKernel10& kernel,
                        std::string_view demangled, const LaunchFacts& launch,
                        std::int64_t clock_offset_ns) {
  JsonWriter json(out);
  json.begin_object().field("kind", "kernel");
  json.field("name", std::string_view(kernel.name != nullptr ? kernel.name : ""));
  json.field("demangled", demangled);
  common_fields(json, kernel.deviceId, kernel.contextId, kernel.streamId, kernel.correlationId,
                kernel.start, kernel.end, clock_offset_ns);
  json.key("grid").begin_array().value(kernel.gridX).value(kernel.gridY).value(kernel.gridZ).end_array();
  json.key("block").begin_array().value(kernel.blockX).value(kernel.blockY).value(kernel.blockZ).end_array();
  json.field("shared_bytes",
             static_cast<std::int64_t>(kernel.staticSharedMemory) + kernel.dynamicSharedMemory);
  json.field("registers", static_cast<std::int64_t>(kernel.registersPerThread));
  json.field("graph", static_cast<std::int64_t>(kernel.graphId));
  launch_fields(json, launch);
  json.end_object();
  out += '\n';
}

void append_memcpy_line(std::string& out, const CUpti_ActivityMemcpy6& copy, const LaunchFacts& launch,
                        std::int64_t clock_offset_ns) {
  JsonWriter json(out);
  json.begin_object().field("kind", "memcpy").field("copy", memcpy_kind_name(copy.copyKind));
  json.field("bytes", static_cast<std::int64_t>(copy.bytes));
  common_fields(json, copy.deviceId, copy.contextId, copy.streamId, copy.correlationId, copy.start,
                copy.end, clock_offset_ns);
  json.field("graph", static_cast<std::int64_t>(copy.graphId));
  launch_fields(json, launch);
  json.end_object();
  out += '\n';
}

void append_memset_line(std::string& out, const CUpti_ActivityMemset4& set, const LaunchFacts& launch,
                        std::int64_t clock_offset_ns) {
  JsonWriter json(out);
  json.begin_object().field("kind", "memset");
  json.field("bytes", static_cast<std::int64_t>(set.bytes));
  common_fields(json, set.deviceId, set.contextId, set.streamId, set.correlationId, set.start, set.end,
                clock_offset_ns);
  json.field("graph", static_cast<std::int64_t>(set.graphId));
  launch_fields(json, launch);
  json.end_object();
  out += '\n';
}

void append_summary_line(std::string& out, const TraceCounters& counters, const TraceSettings& settings) {
  const auto n = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  JsonWriter json(out);
  json.begin_object().field("kind", "summary");
  json.field("pid", n(settings.pid)).field("flush", n(settings.flush));
  json.key("records")
      .begin_object()
      .field("kernel", n(counters.kernels))
      .field("memcpy", n(counters.memcpys))
      .field("memset", n(counters.memsets))
      .field("other", n(counters.other_records))
      .end_object();
  json.field("dropped", n(counters.dropped))
      .field("buffer_errors", n(counters.buffer_errors))
      .field("write_failures", n(counters.write_failures))
      .field("launches", n(counters.launches))
      .field("unknown_launchers", n(counters.unknown_launchers))
      .field("unresolved_walks", n(counters.unresolved_walks))
      .field("provenance", settings.provenance)
      .field("clock", settings.clock)
      .field("cupti_version", n(settings.cupti_version))
      .field("cupti_header_version", n(settings.cupti_header_version))
      .field("callbacks", n(settings.callbacks))
      .field("cupti_library", settings.cupti_library);
  json.end_object();
  out += '\n';
}

void append_error_line(std::string& out, std::uint32_t pid, std::string_view message) {
  JsonWriter json(out);
  json.begin_object()
      .field("kind", "error")
      .field("pid", static_cast<std::int64_t>(pid))
      .field("message", message)
      .end_object();
  out += '\n';
}

void append_mark_line(std::string& out, std::uint32_t pid, std::uint32_t correlation, std::uint32_t stream,
                      std::uint64_t at_ns) {
  JsonWriter json(out);
  json.begin_object()
      .field("kind", "mark")
      .field("pid", static_cast<std::int64_t>(pid))
      .field("correlation", static_cast<std::int64_t>(correlation))
      .field("stream", static_cast<std::int64_t>(stream))
      .field("at_ns", static_cast<std::int64_t>(at_ns))
      .end_object();
  out += '\n';
}

}  // namespace cudaagent::cupti
