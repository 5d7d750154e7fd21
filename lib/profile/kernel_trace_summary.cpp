// Summaries of a kernel trace over a time window: each activity is split into the parts before,
// inside and after the window; busy times are unions of intervals (sorted and merged), shares are
// of summed durations so that they add up to 1 even when streams overlap.
#include "cudaagent/profile/kernel_trace.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace cudaagent {
namespace {

using Interval = std::pair<std::uint64_t, std::uint64_t>;

// Intervals of one group, and their busy time once merged.
struct Group {
  std::vector<Interval> intervals;
  GpuTime time;
  void add(std::uint64_t start, std::uint64_t end) {
    intervals.emplace_back(start, end);
    time.sum_ns += end - start;
    ++time.count;
  }
  GpuTime finish() {
    std::sort(intervals.begin(), intervals.end());
    std::uint64_t busy = 0, open_start = 0, open_end = 0;
    bool open = false;
    for (const auto& [start, end] : intervals) {
      if (open && start <= open_end) {
        open_end = std::max(open_end, end);
        continue;
      }
      if (open) busy += open_end - open_start;
      open_start = start;
      open_end = end;
      open = true;
    }
    if (open) busy += open_end - open_start;
    time.busy_ns = busy;
    intervals.clear();
    intervals.shrink_to_fit();
    return time;
  }
};

bool under(std::string_view path, std::string_view root) {
  while (root.size() > 1 && root.back() == '/') root.remove_suffix(1);
  if (root.empty() || !path.starts_with(root)) return false;
  return path.size() == root.size() || path[root.size()] == '/' || root == "/";
}

bool under_any(std::string_view path, const std::vector<std::string>& roots) {
  return std::any_of(roots.begin(), roots.end(), [&](const std::string& root) { return under(path, root); });
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

bool contains_any(std::string_view text, std::initializer_list<std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view needle) { return text.find(needle) != std::string_view::npos; });
}

// A kernel's own qualified name: its demangled name up to its template arguments or parameters
// ("(anonymous namespace)" is part of a name, not a parameter list).
std::string_view own_name(std::string_view demangled) {
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  for (std::size_t i = 0; i < demangled.size(); ++i) {
    if (demangled.substr(i).starts_with(kAnonymous)) {
      i += kAnonymous.size() - 1;
    } else if (demangled[i] == '<' || demangled[i] == '(') {
      return demangled.substr(0, i);
    }
  }
  return demangled;
}

double share_of(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

void write_time(JsonWriter& json, const GpuTime& time) {
  json.begin_object()
      .field("busy_ns", static_cast<std::int64_t>(time.busy_ns))
      .field("sum_ns", static_cast<std::int64_t>(time.sum_ns))
      .field("count", static_cast<std::int64_t>(time.count))
      .end_object();
}

}  // namespace

std::string_view launcher_class_name(LauncherClass c) {
  switch (c) {
    case LauncherClass::candidate: return "candidate";
    case LauncherClass::cuda_library: return "cuda_library";
    case LauncherClass::torch: return "torch";
    case LauncherClass::triton: return "triton";
    case LauncherClass::other: return "other";
    case LauncherClass::unknown: return "unknown";
  }
  return "unknown";
}

LauncherClass classify_launcher(std::string_view path, const ClassifySettings& settings) {
  if (path.empty()) return LauncherClass::unknown;
  if (under_any(path, settings.candidate_paths)) return LauncherClass::candidate;
  if (!settings.trusted_library_paths.empty() && !under_any(path, settings.trusted_library_paths)) {
    return LauncherClass::other;
  }
  const auto slash = path.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (base.find(".so") != std::string_view::npos) {
    for (std::string_view prefix : {"libcublas", "libcudnn", "libcufft", "libcurand", "libcusparse",
                                    "libcusolver", "libnccl", "libcutensor", "libnvjpeg", "libnpp"}) {
      if (base.starts_with(prefix)) return LauncherClass::cuda_library;
    }
    if (base.starts_with("libtorch") || base.starts_with("libc10")) return LauncherClass::torch;
  }
  if (path.find("triton") != std::string_view::npos) return LauncherClass::triton;
  return LauncherClass::other;
}

LauncherClass classify_kernel_name(std::string_view mangled, std::string_view demangled) {
  if (mangled.starts_with("triton_") || mangled.starts_with("triton")) return LauncherClass::triton;
  const std::string name = lower(mangled);
  // torch's attention kernels: FlashAttention in its own namespace, and the memory-efficient
  // kernels (fmha_cutlass*) whose names would otherwise read as the CUTLASS library's.
  if (contains_any(mangled, {"pytorch_flash", "fmha_cutlass"}) ||
      contains_any(demangled, {"pytorch_flash::", "fmha_cutlass"})) {
    return LauncherClass::torch;
  }
  if (contains_any(name, {"cublas", "cutlass", "cudnn", "nvjet", "xmma", "cusparse", "cufft", "cusolver",
                          "curand", "nccl", "cutensor", "splitkreduce"})) {
    return LauncherClass::cuda_library;
  }
  // Demangled or, when the trace gave none, the Itanium encodings of the same namespaces. ATen's
  // internals mark a kernel wherever they appear (torch's top-k takes at::cuda's TensorInfo, its
  // softmax an at::native epilogue as a template argument), but c10 only in the kernel's own name:
  // c10's types (ArrayRef, Half) are in the packed accessors extension kernels take.
  if (contains_any(demangled, {"at::native::", "at::cuda::", "at_cuda_detail"}) ||
      own_name(demangled).find("c10::") != std::string_view::npos ||
      contains_any(mangled, {"N2at6native", "N2at4cuda", "at_cuda_detail"}) || mangled.starts_with("_ZN3c10")) {
    return LauncherClass::torch;
  }
  return LauncherClass::unknown;
}

Result<TraceSummary> summarize_trace(const KernelTrace& trace, const TraceWindow& window,
                                     const SummarySettings& settings) {
  if (window.end_ns < window.start_ns) return Status::error("trace window ends before it starts");
  const std::uint64_t t0 = window.start_ns, t1 = window.end_ns;

  // The class of each launcher and of each name, computed once.
  std::vector<LauncherClass> launcher_class(trace.launchers.size());
  for (std::size_t i = 0; i < trace.launchers.size(); ++i) {
    launcher_class[i] = classify_launcher(trace.launchers[i], settings.classify);
  }
  std::vector<LauncherClass> name_class(trace.names.size());
  for (std::size_t i = 0; i < trace.names.size(); ++i) {
    name_class[i] = classify_kernel_name(trace.names[i], i < trace.demangled.size() ? trace.demangled[i] : "");
  }

  TraceSummary summary;
  summary.window_ns = t1 - t0;
  Group all, kernels, before, after, off_stream;
  std::map<std::uint32_t, Group> streams;
  std::array<Group, kLauncherClasses> classes;
  std::array<std::uint64_t, kLauncherClasses> by_name{};
  std::map<std::uint32_t, Group> launchers;
  struct RowTotal {
    std::uint64_t calls = 0, total = 0;
  };
  std::map<std::tuple<TraceKind, std::uint32_t, std::uint32_t>, RowTotal> rows;
  std::set<std::uint32_t> devices, contexts, threads;

  for (const TraceActivity& a : trace.activities) {
    if (a.start_ns < t0) before.add(a.start_ns, std::min(a.end_ns, t0));
    if (a.end_ns > t1) after.add(std::max(a.start_ns, t1), a.end_ns);
    if (a.start_ns > t1 || a.end_ns < t0) continue;
    const std::uint64_t lo = std::max(a.start_ns, t0), hi = std::min(a.end_ns, t1);
    all.add(lo, hi);
    if (a.kind == TraceKind::kernel) kernels.add(lo, hi);
    streams[a.stream].add(lo, hi);
    if (window.stream && a.stream != *window.stream) off_stream.add(lo, hi);
    LauncherClass c = LauncherClass::unknown;
    if (a.launcher != kNoLauncher && a.launcher < launcher_class.size()) {
      c = launcher_class[a.launcher];
    } else {
      ++summary.unknown_launchers;
      if (a.name < name_class.size()) c = name_class[a.name];
      if (c != LauncherClass::unknown) ++by_name[static_cast<int>(c)];
    }
    classes[static_cast<int>(c)].add(lo, hi);
    launchers[a.launcher].add(lo, hi);
    auto& row = rows[{a.kind, a.name, a.launcher}];
    ++row.calls;
    row.total += hi - lo;
    devices.insert(a.device);
    contexts.insert(a.context);
    if (a.tid != 0) threads.insert(a.tid);
  }

  summary.all = all.finish();
  summary.kernels = kernels.finish();
  summary.before = before.finish();
  summary.after = after.finish();
  if (window.stream) summary.off_stream = off_stream.finish();
  for (auto& [stream, group] : streams) summary.streams.push_back({stream, group.finish()});
  for (int i = 0; i < kLauncherClasses; ++i) {
    auto& share = summary.classes[static_cast<std::size_t>(i)];
    share.launcher_class = static_cast<LauncherClass>(i);
    share.time = classes[static_cast<std::size_t>(i)].finish();
    share.share = share_of(share.time.sum_ns, summary.all.sum_ns);
    share.by_name = by_name[static_cast<std::size_t>(i)];
  }
  for (auto& [index, group] : launchers) {
    LauncherShare share;
    if (index != kNoLauncher && index < trace.launchers.size()) {
      share.path = trace.launchers[index];
      share.launcher_class = launcher_class[index];
    }
    share.time = group.finish();
    share.share = share_of(share.time.sum_ns, summary.all.sum_ns);
    summary.launchers.push_back(std::move(share));
  }
  std::stable_sort(summary.launchers.begin(), summary.launchers.end(),
                   [](const LauncherShare& a, const LauncherShare& b) { return a.time.sum_ns > b.time.sum_ns; });

  std::vector<std::pair<std::tuple<TraceKind, std::uint32_t, std::uint32_t>, RowTotal>> ordered(rows.begin(),
                                                                                                 rows.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.second.total > b.second.total; });
  if (ordered.size() > settings.top_n) ordered.resize(settings.top_n);
  for (const auto& [key, total] : ordered) {
    const auto& [kind, name, launcher] = key;
    KernelRow row;
    row.kind = kind;
    if (name < trace.names.size()) {
      const bool readable = name < trace.demangled.size() && !trace.demangled[name].empty();
      row.name = readable ? trace.demangled[name] : trace.names[name];
    }
    if (launcher != kNoLauncher && launcher < trace.launchers.size()) {
      row.launcher = trace.launchers[launcher];
      row.launcher_class = launcher_class[launcher];
    } else if (name < name_class.size()) {
      row.launcher_class = name_class[name];
      row.class_by_name = row.launcher_class != LauncherClass::unknown;
    }
    row.calls = total.calls;
    row.total_ns = total.total;
    row.mean_ns = total.calls == 0 ? 0.0 : static_cast<double>(total.total) / static_cast<double>(total.calls);
    row.share = share_of(total.total, summary.all.sum_ns);
    summary.top.push_back(std::move(row));
  }
  summary.devices = static_cast<std::uint32_t>(devices.size());
  summary.contexts = static_cast<std::uint32_t>(contexts.size());
  summary.threads = static_cast<std::uint32_t>(threads.size());
  return summary;
}

void write_trace_summary(JsonWriter& json, const TraceSummary& summary) {
  const auto n = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  json.begin_object()
      .field("window_ns", n(summary.window_ns))
      .field("busy_ns", n(summary.all.busy_ns))
      .field("sum_ns", n(summary.all.sum_ns))
      .field("activities", n(summary.all.count))
      .field("kernel_busy_ns", n(summary.kernels.busy_ns));
  json.key("streams").begin_array();
  for (const auto& s : summary.streams) {
    json.begin_object()
        .field("stream", n(s.stream))
        .field("busy_ns", n(s.time.busy_ns))
        .field("sum_ns", n(s.time.sum_ns))
        .field("count", n(s.time.count))
        .end_object();
  }
  json.end_array();
  json.key("classes").begin_object();
  for (const auto& c : summary.classes) {
    json.key(launcher_class_name(c.launcher_class))
        .begin_object()
        .field("sum_ns", n(c.time.sum_ns))
        .field("busy_ns", n(c.time.busy_ns))
        .field("count", n(c.time.count))
        .field("share", c.share)
        .field("by_name", n(c.by_name))
        .end_object();
  }
  json.end_object();
  json.key("launchers").begin_array();
  for (const auto& l : summary.launchers) {
    json.begin_object()
        .field("path", l.path)
        .field("class", launcher_class_name(l.launcher_class))
        .field("sum_ns", n(l.time.sum_ns))
        .field("count", n(l.time.count))
        .field("share", l.share)
        .end_object();
  }
  json.end_array();
  json.key("top").begin_array();
  for (const auto& r : summary.top) {
    json.begin_object()
        .field("kind", trace_kind_name(r.kind))
        .field("name", r.name)
        .field("launcher", r.launcher)
        .field("class", launcher_class_name(r.launcher_class))
        .field("class_by_name", r.class_by_name)
        .field("calls", n(r.calls))
        .field("total_ns", n(r.total_ns))
        .field("mean_ns", r.mean_ns)
        .field("share", r.share)
        .end_object();
  }
  json.end_array();
  json.key("before");
  write_time(json, summary.before);
  json.key("after");
  write_time(json, summary.after);
  json.key("off_stream");
  if (summary.off_stream) {
    write_time(json, *summary.off_stream);
  } else {
    json.null();
  }
  json.field("unknown_launchers", n(summary.unknown_launchers))
      .field("devices", n(summary.devices))
      .field("contexts", n(summary.contexts))
      .field("threads", n(summary.threads))
      .end_object();
}

void write_trace_health(JsonWriter& json, const KernelTrace& trace) {
  const auto n = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  const TraceLosses losses = trace_losses(trace);
  json.begin_object().field("lines", n(trace.lines)).field("rejected", n(trace.rejected));
  json.key("problems").begin_array();
  for (const auto& p : trace.problems) {
    json.begin_object().field("line", n(p.line)).field("reason", p.reason).end_object();
  }
  json.end_array();
  json.field("processes", n(trace.summaries.size()));
  json.key("errors").begin_array();
  for (const auto& e : trace.errors) json.value(e);
  json.end_array();
  json.field("error_lines", n(trace.error_lines))
      .field("after_last_summary", n(trace.after_last_summary))
      .field("truncated", trace.truncated)
      .field("dropped", n(losses.dropped))
      .field("buffer_errors", n(losses.buffer_errors))
      .field("write_failures", n(losses.write_failures))
      .field("missing", n(losses.missing))
      .field("launches", n(losses.launches))
      .field("records", n(losses.records))
      .end_object();
}

}  // namespace cudaagent
