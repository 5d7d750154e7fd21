// Progress on stderr for long runs: records, throughput, rate and (when the input size is known)
// an ETA, redrawn at most a few times a second and only when stderr is a terminal.
#pragma once

#include <cstdint>
#include <optional>

#include "cudaagent/base/session.h"

namespace cudaagent {

class Progress {
 public:
  // Shows progress only if `enabled` (not --quiet) and stderr is a terminal.
  Progress(const Session& session, bool enabled);
  ~Progress();  // clears the progress line

  // Cheap to call per record: it redraws only every 250 ms.
  void update(std::uint64_t records, std::uint64_t bytes_done,
              std::optional<std::uint64_t> bytes_total);

 private:
  const Session& session_;
  bool active_;
  double start_;
  double last_draw_ = 0;
  bool drawn_ = false;
};

// "1.2 GB", "340 kB": sizes for people.
std::string human_bytes(double bytes);

}  // namespace cudaagent
