// Was a forward's work finished when its output was copied? The session's runner marks the trace
// (a "mark" line: cudaagent_cupti_mark) once a forward has returned, naming the highest
// correlation id launched so far and the stream its output copies go on. In the trace, the first
// activity after the mark on that stream is the first copy. Work the forward launched (a
// correlation id at or below the mark) that was still running once that copy began was left on a
// stream never joined back: with one wait per call (--forward-sync call) it would run past the
// timed window, untimed, and its output might not be final when copied. Work launched after the
// mark on another stream is none of the harness's either.
// Key choice: the times compared are one GPU's timestamps of one process, so the tolerance is a
// few microseconds, not the edge tolerance between two clocks; the calls' windows are the owner's
// (trusted), and a timed call without a usable mark is reported for the caller to withhold on,
// never read as clean.
#pragma once

#include <cstdint>
#include <vector>

#include "cudaagent/profile/kernel_trace.h"

namespace cudaagent {

struct OutputWindow {  // one call of the candidate's model, on the owner's CLOCK_MONOTONIC
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
};

struct OutputMarkFacts {
  std::uint64_t calls = 0;           // calls checked
  std::uint64_t marks = 0;           // marks of the process inside them
  std::uint64_t unmarked_calls = 0;  // calls with no mark, or a mark with no copy after it
  // Of work launched before a mark: how far past the first copy after it it ran, summed.
  std::uint64_t after_output_ns = 0;
  std::uint64_t late_activities = 0;
  // Work launched after a call's last mark on a stream other than the copies'.
  std::uint64_t after_mark_elsewhere_ns = 0;
};

// `pid`: the runner's process (marks of other processes are not its harness's); `windows`:
// sorted, non-overlapping. Activities belong to the call whose window holds their start. Pure.
OutputMarkFacts check_output_marks(const KernelTrace& trace, std::uint64_t pid, const std::vector<OutputWindow>& windows,
                                   std::uint64_t tolerance_ns);

}  // namespace cudaagent
