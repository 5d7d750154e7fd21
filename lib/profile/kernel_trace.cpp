// Reading kernel traces: each line parsed with simdjson in place (the text carries simdjson's
// padding), every field type- and range-checked, strings interned under caps. A line that fails a
// check is counted with the first reason found; it never stops the read.
#include "cudaagent/profile/kernel_trace.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace cudaagent {
namespace {

constexpr std::uint64_t kMaxU32 = std::numeric_limits<std::uint32_t>::max();

// Thrown inside one line's parse and caught by its caller: the line is rejected with `reason`.
struct BadLine {
  std::string reason;
};

class TraceParser {
 public:
  TraceParser(const TraceLimits& limits, KernelTrace& trace) : limits_(limits), trace_(trace) {}

  // `data` is followed by at least simdjson::SIMDJSON_PADDING readable bytes.
  void parse(const char* data, std::size_t size) {
    std::uint64_t number = 0;
    std::size_t at = 0;
    while (at < size) {
      const void* newline = std::memchr(data + at, '\n', size - at);
      const std::size_t end = newline != nullptr ? static_cast<std::size_t>(static_cast<const char*>(newline) - data) : size;
      ++number;
      std::size_t length = end - at;
      if (length > 0 && data[at + length - 1] == '\r') --length;
      if (length > 0) line(number, data + at, length);
      at = end + 1;
    }
  }

 private:
  void reject(std::uint64_t number, std::string reason) {
    ++trace_.rejected;
    if (trace_.problems.size() < limits_.kept_problems) trace_.problems.push_back({number, std::move(reason)});
  }

  void line(std::uint64_t number, const char* data, std::size_t size) {
    ++trace_.lines;
    if (size > limits_.max_line_bytes) {
      reject(number, "line of " + std::to_string(size) + " bytes is over the cap of " +
                         std::to_string(limits_.max_line_bytes));
      return;
    }
    simdjson::dom::element root;
    if (const auto error = parser_.parse(data, size, false).get(root)) {
      reject(number, std::string("not JSON: ") + simdjson::error_message(error));
      return;
    }
    simdjson::dom::object object;
    if (root.get_object().get(object)) {
      reject(number, "not a JSON object");
      return;
    }
    try {
      const std::string_view kind = text(object, "kind", 16);
      if (kind == "kernel" || kind == "memcpy" || kind == "memset") {
        activity(number, object, kind);
      } else if (kind == "summary") {
        summary(object);
      } else if (kind == "mark") {
        mark(number, object);
      } else if (kind == "error") {
        ++trace_.error_lines;
        if (trace_.errors.size() < limits_.kept_errors) {
          std::string_view message;
          if (object["message"].get_string().get(message)) message = "(no message)";
          trace_.errors.emplace_back(message.substr(0, limits_.max_name_bytes));
        }
      } else {
        throw BadLine{"unknown kind '" + std::string(kind) + "'"};
      }
    } catch (const BadLine& bad) {
      reject(number, bad.reason);
    }
  }

  // A string field of at most `max` bytes.
  static std::string_view text(simdjson::dom::object& object, const char* key, std::size_t max) {
    std::string_view value;
    if (object[key].get_string().get(value)) throw BadLine{std::string("'") + key + "' is missing or not a string"};
    if (value.size() > max) {
      throw BadLine{std::string("'") + key + "' of " + std::to_string(value.size()) + " bytes is over the cap of " +
                    std::to_string(max)};
    }
    return value;
  }

  static std::uint64_t number(simdjson::dom::object& object, const char* key, std::uint64_t max) {
    std::uint64_t value = 0;
    if (object[key].get_uint64().get(value)) {
      throw BadLine{std::string("'") + key + "' is missing or not a non-negative integer"};
    }
    if (value > max) throw BadLine{std::string("'") + key + "' is out of range"};
    return value;
  }

  // A number that may be null or absent (0 then).
  static std::uint64_t optional_number(simdjson::dom::object& object, const char* key, std::uint64_t max) {
    simdjson::dom::element element;
    if (object[key].get(element) || element.is_null()) return 0;
    return number(object, key, max);
  }

  static std::array<std::int64_t, 3> triple(simdjson::dom::object& object, const char* key) {
    simdjson::dom::array array;
    std::array<std::int64_t, 3> out{};
    if (object[key].get_array().get(array) || array.size() != 3) {
      throw BadLine{std::string("'") + key + "' is not an array of 3 integers"};
    }
    std::size_t i = 0;
    for (simdjson::dom::element element : array) {
      if (element.get_int64().get(out[i]) || out[i] < 0 || out[i] > static_cast<std::int64_t>(kMaxU32)) {
        throw BadLine{std::string("'") + key + "' is not an array of 3 integers"};
      }
      ++i;
    }
    return out;
  }

  std::uint32_t intern_name(std::string_view name, std::string_view demangled) {
    if (auto it = name_index_.find(std::string(name)); it != name_index_.end()) return it->second;
    if (trace_.names.size() >= limits_.max_names) {
      throw BadLine{"more than " + std::to_string(limits_.max_names) + " distinct kernel names"};
    }
    const auto index = static_cast<std::uint32_t>(trace_.names.size());
    trace_.names.emplace_back(name);
    trace_.demangled.emplace_back(demangled);
    name_index_.emplace(std::string(name), index);
    return index;
  }

  std::uint32_t intern_launcher(std::string_view path) {
    if (auto it = launcher_index_.find(std::string(path)); it != launcher_index_.end()) return it->second;
    if (trace_.launchers.size() >= limits_.max_launchers) {
      throw BadLine{"more than " + std::to_string(limits_.max_launchers) + " distinct launchers"};
    }
    const auto index = static_cast<std::uint32_t>(trace_.launchers.size());
    trace_.launchers.emplace_back(path);
    launcher_index_.emplace(std::string(path), index);
    return index;
  }

  void activity(std::uint64_t line_number, simdjson::dom::object& object, std::string_view kind) {
    if (trace_.activities.size() >= limits_.max_activities) {
      throw BadLine{"more than " + std::to_string(limits_.max_activities) + " activities"};
    }
    TraceActivity a;
    a.line = line_number;
    a.device = static_cast<std::uint32_t>(number(object, "device", kMaxU32));
    a.context = static_cast<std::uint32_t>(number(object, "context", kMaxU32));
    a.stream = static_cast<std::uint32_t>(number(object, "stream", kMaxU32));
    a.correlation = static_cast<std::uint32_t>(number(object, "correlation", kMaxU32));
    a.start_ns = number(object, "start_ns", std::numeric_limits<std::int64_t>::max());
    a.end_ns = number(object, "end_ns", std::numeric_limits<std::int64_t>::max());
    if (a.start_ns == 0) throw BadLine{"no start time (a record flushed before its work ran)"};
    if (a.end_ns < a.start_ns) throw BadLine{"ends before it starts"};
    a.tid = static_cast<std::uint32_t>(optional_number(object, "tid", kMaxU32));
    simdjson::dom::element launcher;
    if (!object["launcher"].get(launcher) && !launcher.is_null()) {
      const std::string_view path = text(object, "launcher", limits_.max_name_bytes);
      if (path.empty()) throw BadLine{"'launcher' is empty"};
      a.launcher = intern_launcher(path);
    }
    if (kind == "kernel") {
      a.kind = TraceKind::kernel;
      const std::string_view name = text(object, "name", limits_.max_name_bytes);
      if (name.empty()) throw BadLine{"'name' is empty"};
      std::string_view demangled;
      if (object["demangled"].get_string().get(demangled)) demangled = {};
      if (demangled.size() > limits_.max_name_bytes) throw BadLine{"'demangled' is over the cap"};
      a.grid = triple(object, "grid");
      a.block = triple(object, "block");
      a.name = intern_name(name, demangled);
    } else if (kind == "memcpy") {
      a.kind = TraceKind::memcpy;
      const std::string_view copy = text(object, "copy", 16);
      for (char c : copy) {
        if (!std::isalnum(static_cast<unsigned char>(c))) throw BadLine{"'copy' is not a copy kind"};
      }
      a.bytes = number(object, "bytes", std::numeric_limits<std::int64_t>::max());
      a.name = intern_name("[memcpy " + std::string(copy) + "]", {});
    } else {
      a.kind = TraceKind::memset;
      a.bytes = number(object, "bytes", std::numeric_limits<std::int64_t>::max());
      a.name = intern_name("[memset]", {});
    }
    trace_.activities.push_back(a);
    ++trace_.after_last_summary;
  }

  void mark(std::uint64_t line_number, simdjson::dom::object& object) {
    if (trace_.marks.size() >= limits_.max_marks) {
      throw BadLine{"more than " + std::to_string(limits_.max_marks) + " marks"};
    }
    TraceMark m;
    m.line = line_number;
    m.pid = number(object, "pid", kMaxU32);
    m.correlation = static_cast<std::uint32_t>(number(object, "correlation", kMaxU32));
    m.stream = static_cast<std::uint32_t>(number(object, "stream", kMaxU32));
    m.at_ns = number(object, "at_ns", std::numeric_limits<std::int64_t>::max());
    trace_.marks.push_back(m);
  }

  void summary(simdjson::dom::object& object) {
    TraceProcessSummary s;
    constexpr std::uint64_t kMax = std::numeric_limits<std::int64_t>::max();
    s.pid = number(object, "pid", kMaxU32);
    s.flush = number(object, "flush", kMax);
    simdjson::dom::object records;
    if (object["records"].get_object().get(records)) throw BadLine{"'records' is missing or not an object"};
    s.kernels = number(records, "kernel", kMax);
    s.memcpys = number(records, "memcpy", kMax);
    s.memsets = number(records, "memset", kMax);
    s.other_records = number(records, "other", kMax);
    s.dropped = number(object, "dropped", kMax);
    s.buffer_errors = number(object, "buffer_errors", kMax);
    s.write_failures = number(object, "write_failures", kMax);
    s.launches = number(object, "launches", kMax);
    s.unknown_launchers = number(object, "unknown_launchers", kMax);
    s.unresolved_walks = number(object, "unresolved_walks", kMax);
    if (object["provenance"].get_bool().get(s.provenance)) throw BadLine{"'provenance' is missing or not a boolean"};
    s.clock = text(object, "clock", 32);
    trace_.after_last_summary = 0;
    if (auto it = pid_index_.find(s.pid); it != pid_index_.end()) {
      // A later flush of the same process: counters are cumulative, keep the latest.
      auto& kept = trace_.summaries[it->second];
      if (s.flush >= kept.flush) kept = std::move(s);
      return;
    }
    if (trace_.summaries.size() >= limits_.max_processes) {
      throw BadLine{"more than " + std::to_string(limits_.max_processes) + " processes"};
    }
    pid_index_.emplace(s.pid, trace_.summaries.size());
    trace_.summaries.push_back(std::move(s));
  }

  const TraceLimits& limits_;
  KernelTrace& trace_;
  simdjson::dom::parser parser_;
  std::unordered_map<std::string, std::uint32_t> name_index_, launcher_index_;
  std::unordered_map<std::uint64_t, std::size_t> pid_index_;
};

// The part of `size` bytes to parse under the cap: whole lines only.
std::size_t capped_size(const char* data, std::size_t size, const TraceLimits& limits, bool& truncated) {
  if (size <= limits.max_bytes) return size;
  truncated = true;
  std::size_t cut = static_cast<std::size_t>(limits.max_bytes);
  while (cut > 0 && data[cut - 1] != '\n') --cut;
  return cut;
}

}  // namespace

std::string_view trace_kind_name(TraceKind kind) {
  switch (kind) {
    case TraceKind::kernel: return "kernel";
    case TraceKind::memcpy: return "memcpy";
    case TraceKind::memset: return "memset";
  }
  return "kernel";
}

KernelTrace parse_kernel_trace(std::string_view text, const TraceLimits& limits) {
  KernelTrace trace;
  bool truncated = false;
  const std::size_t size = capped_size(text.data(), text.size(), limits, truncated);
  const simdjson::padded_string padded(text.data(), size);
  TraceParser(limits, trace).parse(padded.data(), size);
  trace.truncated = truncated;
  return trace;
}

Result<KernelTrace> read_kernel_trace(const std::string& path, const TraceLimits& limits) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return Status::error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error("cannot read '" + path + "': not a regular file");
  }
  // Read up to one byte past the cap, to know whether there was more.
  const std::uint64_t want = std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), limits.max_bytes) + 1;
  std::string bytes;
  bytes.resize(static_cast<std::size_t>(want) + simdjson::SIMDJSON_PADDING);
  std::size_t got = 0;
  while (got < want) {
    const ssize_t n = ::read(fd, bytes.data() + got, static_cast<std::size_t>(want) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      return Status::error("cannot read '" + path + "': " + std::strerror(saved));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  KernelTrace trace;
  bool truncated = false;
  const std::size_t size = capped_size(bytes.data(), got, limits, truncated);
  TraceParser(limits, trace).parse(bytes.data(), size);
  trace.truncated = truncated;
  return trace;
}

TraceLosses trace_losses(const KernelTrace& trace) {
  TraceLosses losses;
  std::uint64_t announced = 0;
  for (const auto& s : trace.summaries) {
    losses.dropped += s.dropped;
    losses.buffer_errors += s.buffer_errors;
    losses.write_failures += s.write_failures;
    announced += s.kernels + s.memcpys + s.memsets;
    losses.launches += s.launches;
  }
  losses.records = announced;
  // Activities after the last summary line are not covered by it (a one-process trace assumed).
  // Rejected lines are reported on their own, so they are not counted as missing twice.
  const std::uint64_t covered = trace.activities.size() - trace.after_last_summary + trace.rejected;
  losses.missing = announced > covered ? announced - covered : 0;
  return losses;
}

}  // namespace cudaagent
