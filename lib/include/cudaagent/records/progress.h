// Progress on stderr for long runs: records finished, the rate, and an ETA when the end can be
// estimated. On a terminal it is the logger's status line (one self-overwriting line that never
// shares a line with a message, redrawn at most four times a second); in a batch log (stderr not
// a terminal: a Slurm job's output file) it is a plain line every `interval` seconds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cudaagent/base/session.h"

namespace cudaagent {

// Where a run stands, as the stage knows it.
struct ProgressState {
  std::uint64_t done = 0;                // records finished (written, turned into errors, dropped)
  std::uint64_t read = 0;                // records taken from the input so far
  std::optional<std::uint64_t> total;    // how many there are, when known (a count; the end of input)
  std::optional<double> input_fraction;  // else the share of the input read (0..1), when known
};

// "12 of 40 records, 0.80/s, ETA 0:35" (total known or estimated from the input read so far),
// "12 records, 0.80/s" (nothing known), after `elapsed` seconds. Exposed for tests.
std::string progress_text(const ProgressState& state, double elapsed);

class Progress {
 public:
  // Shows nothing unless `enabled` (not --quiet). `interval_seconds`: how often a batch log gets
  // a line (0: never).
  Progress(Session& session, bool enabled, double interval_seconds);
  ~Progress();  // clears the status line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Cheap to call often: it draws only when the terminal line or the next log line is due.
  void update(const ProgressState& state);

 private:
  Session& session_;
  bool enabled_;
  bool terminal_;
  double interval_;
  double start_;
  double last_draw_;
};

// "1.2 GB", "340 kB": sizes for people.
std::string human_bytes(double bytes);

// "0:35", "12:05", "3:02:11": a duration for people.
std::string human_duration(double seconds);

}  // namespace cudaagent
