// A single self-overwriting stderr line ("\r...\x1b[K"), so it never mixes with records on stdout.
#include "cudaagent/records/progress.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace cudaagent {

std::string human_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 4) {
    bytes /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, kUnits[unit]);
  return text;
}

Progress::Progress(const Session& session, bool enabled)
    : session_(session),
      active_(enabled && ::isatty(STDERR_FILENO) == 1),
      start_(session.clock.now_seconds()) {}

Progress::~Progress() {
  if (drawn_) std::fputs("\r\x1b[K", stderr);
}

void Progress::update(std::uint64_t records, std::uint64_t bytes_done,
                      std::optional<std::uint64_t> bytes_total) {
  if (!active_) return;
  const double now = session_.clock.now_seconds();
  if (now - last_draw_ < 0.25) return;
  last_draw_ = now;
  const double elapsed = std::max(now - start_, 1e-9);
  const double rate = static_cast<double>(bytes_done) / elapsed;
  std::string line = "\r" + session_.log.program() + ": " + std::to_string(records) + " records, " +
                     human_bytes(static_cast<double>(bytes_done)) + ", " + human_bytes(rate) +
                     "/s, " + std::to_string(static_cast<long long>(static_cast<double>(records) / elapsed)) +
                     " records/s";
  if (bytes_total && *bytes_total > bytes_done && rate > 0) {
    const auto eta = static_cast<long long>(static_cast<double>(*bytes_total - bytes_done) / rate);
    char text[32];
    std::snprintf(text, sizeof text, ", ETA %lld:%02lld", eta / 60, eta % 60);
    line += text;
  }
  line += "\x1b[K";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace cudaagent
