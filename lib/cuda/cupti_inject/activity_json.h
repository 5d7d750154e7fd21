// The trace's line format, written by the injection library and read by lib/profile/kernel_trace.cpp
// (the contract is documented there, in cudaagent/kernel_trace.h). One JSON object per line:
// "kernel", "memcpy" and "memset" lines for GPU work, "summary" lines with the counters, "error"
// lines when tracing cannot run, "mark" lines when the harness copies a forward's output. Key
// choice: the formatters take CUPTI's own record structs, so a unit test can build records by hand
// and read them back through the real reader without a GPU.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace cudaagent::cupti {

// What the callback side knows about one record's launch.
struct LaunchFacts {
  std::string_view launcher;  // path of the launching object; empty: unknown
  std::uint32_t tid = 0;      // launching thread; 0: unknown
};

// Each appends one line, with its '\n'. `clock_offset_ns` is subtracted from CUPTI's timestamps
// (0 when CUPTI already reports CLOCK_MONOTONIC through the timestamp callback).
void append_kernel_line(std::string& out, const CUpti_ActivityKernel10& kernel,
                        std::string_view demangled, const LaunchFacts& launch,
                        std::int64_t clock_offset_ns);
void append_memcpy_line(std::string& out, const CUpti_ActivityMemcpy6& copy, const LaunchFacts& launch,
                        std::int64_t clock_offset_ns);
void append_memset_line(std::string& out, const CUpti_ActivityMemset4& set, const LaunchFacts& launch,
                        std::int64_t clock_offset_ns);

// "HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "HtoA", ... or "unknown".
const char* memcpy_kind_name(std::uint8_t copy_kind);

// The demangled form of a C++ name, or the name itself when it is not a mangled C++ name.
std::string demangle(const char* mangled);

// Counters a summary line reports; cumulative over the process.
struct TraceCounters {
  std::uint64_t kernels = 0, memcpys = 0, memsets = 0;
  std::uint64_t other_records = 0;   // records of kinds the reader does not use
  std::uint64_t dropped = 0;         // cuptiActivityGetNumDroppedRecords, summed
  std::uint64_t buffer_errors = 0;   // cuptiActivityGetNextRecord failures (rest of buffer lost)
  std::uint64_t write_failures = 0;  // lines that could not be written to the output
  std::uint64_t launches = 0;        // launch API calls seen by the callback
  std::uint64_t unknown_launchers = 0;  // records whose launcher could not be found
  std::uint64_t unresolved_walks = 0;   // stack walks that found no launcher
};

struct TraceSettings {
  std::uint32_t pid = 0;
  std::uint32_t flush = 0;            // 1 for the first summary of the process, then 2, ...
  bool provenance = true;             // stack walks enabled
  const char* clock = "monotonic";    // "monotonic" or "monotonic_offset" (converted, see below)
  std::uint32_t cupti_version = 0;    // cuptiGetVersion at run time
  std::uint32_t cupti_header_version = CUPTI_API_VERSION;
  std::uint32_t callbacks = 0;        // launch/copy API callbacks enabled
  std::string_view cupti_library;     // path of the CUPTI library in use
};

void append_summary_line(std::string& out, const TraceCounters& counters, const TraceSettings& settings);
void append_error_line(std::string& out, std::uint32_t pid, std::string_view message);

// The harness's mark that a forward's output is about to be copied out: every launch made before
// it has a correlation id of at most `correlation`, and the copies are queued on `stream` (a trace
// stream id). The reader checks that no earlier work was still running once the copies began.
void append_mark_line(std::string& out, std::uint32_t pid, std::uint32_t correlation, std::uint32_t stream,
                      std::uint64_t at_ns);

}  // namespace cudaagent::cupti
