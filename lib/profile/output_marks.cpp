// The check of output_marks.h: marks grouped by call, the first copy after each mark found in one
// pass over the activities, late work summed in a second.
#include "cudaagent/profile/output_marks.h"

#include <algorithm>
#include <limits>

namespace cudaagent {
namespace {

constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();

struct Mark {
  std::uint32_t correlation = 0;
  std::uint32_t stream = 0;
  std::uint64_t first_copy_ns = kNone;  // start of the first activity after it on its stream
};

// The index of the window holding `at`, or windows.size().
std::size_t window_of(const std::vector<OutputWindow>& windows, std::uint64_t at) {
  auto it = std::partition_point(windows.begin(), windows.end(), [&](const OutputWindow& w) { return w.end_ns < at; });
  if (it == windows.end() || it->start_ns > at) return windows.size();
  return static_cast<std::size_t>(it - windows.begin());
}

}  // namespace

OutputMarkFacts check_output_marks(const KernelTrace& trace, std::uint64_t pid, const std::vector<OutputWindow>& windows,
                                   std::uint64_t tolerance_ns) {
  OutputMarkFacts facts;
  facts.calls = windows.size();
  // Each call's marks, in correlation order (a call of several forwards has one per forward).
  std::vector<std::vector<Mark>> marks(windows.size());
  for (const TraceMark& m : trace.marks) {
    if (m.pid != pid) continue;
    const std::size_t w = window_of(windows, m.at_ns);
    if (w == windows.size()) continue;
    marks[w].push_back({m.correlation, m.stream});
    ++facts.marks;
  }
  for (auto& call : marks) {
    std::sort(call.begin(), call.end(), [](const Mark& x, const Mark& y) { return x.correlation < y.correlation; });
  }
  // The first copy after each mark: the earliest activity of the call launched after it on its stream.
  for (const TraceActivity& a : trace.activities) {
    const std::size_t w = window_of(windows, a.start_ns);
    if (w == windows.size()) continue;
    for (Mark& m : marks[w]) {
      if (a.correlation > m.correlation && a.stream == m.stream) m.first_copy_ns = std::min(m.first_copy_ns, a.start_ns);
    }
  }
  for (const auto& call : marks) {
    const bool usable = !call.empty() && std::all_of(call.begin(), call.end(), [](const Mark& m) { return m.first_copy_ns != kNone; });
    if (!usable) ++facts.unmarked_calls;
  }
  for (const TraceActivity& a : trace.activities) {
    const std::size_t w = window_of(windows, a.start_ns);
    if (w == windows.size() || marks[w].empty()) continue;
    const auto& call = marks[w];
    // The first mark made after this launch: its forward's copy must find the work finished.
    auto it = std::partition_point(call.begin(), call.end(), [&](const Mark& m) { return m.correlation < a.correlation; });
    if (it == call.end()) {
      if (a.stream != call.back().stream) facts.after_mark_elsewhere_ns += a.end_ns - a.start_ns;
      continue;
    }
    if (it->first_copy_ns != kNone && a.end_ns > it->first_copy_ns + tolerance_ns) {
      facts.after_output_ns += a.end_ns - it->first_copy_ns;
      ++facts.late_activities;
    }
  }
  return facts;
}

}  // namespace cudaagent
