// Progress: the estimate (records per second since the start; the total from a count, from the
// end of input, or extrapolated from the share of the input read) and where it is shown.
#include "cudaagent/records/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cudaagent {
namespace {
constexpr double kTerminalRedrawSeconds = 0.25;
}

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

std::string human_duration(double seconds) {
  const auto total = static_cast<long long>(std::llround(std::max(seconds, 0.0)));
  char text[48];
  if (total >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", total / 3600, total / 60 % 60, total % 60);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", total / 60, total % 60);
  }
  return text;
}

std::string progress_text(const ProgressState& state, double elapsed) {
  std::optional<double> total;
  bool estimated = false;
  if (state.total) {
    total = static_cast<double>(*state.total);
  } else if (state.input_fraction && *state.input_fraction > 0 && state.read > 0) {
    total = static_cast<double>(state.read) / std::min(*state.input_fraction, 1.0);
    estimated = true;
  }
  std::string text = std::to_string(state.done);
  if (total) {
    text += std::string(" of ") + (estimated ? "~" : "") +
            std::to_string(static_cast<long long>(std::llround(*total)));
  }
  text += " records";
  const double rate = elapsed > 0 ? static_cast<double>(state.done) / elapsed : 0;
  char number[64];
  std::snprintf(number, sizeof number, ", %.3g/s", rate);
  text += number;
  if (total && rate > 0 && *total > static_cast<double>(state.done)) {
    text += ", ETA " + human_duration((*total - static_cast<double>(state.done)) / rate);
  }
  return text;
}

Progress::Progress(Session& session, bool enabled, double interval_seconds)
    : session_(session),
      enabled_(enabled),
      terminal_(session.log.terminal()),
      interval_(interval_seconds),
      start_(session.clock.now_seconds()),
      // A terminal shows the line at once; a log gets its first line one interval in.
      last_draw_(terminal_ ? -1e300 : start_) {}

Progress::~Progress() {
  if (enabled_ && terminal_) session_.log.set_status("");
}

void Progress::update(const ProgressState& state) {
  if (!enabled_ || (!terminal_ && interval_ <= 0)) return;
  const double now = session_.clock.now_seconds();
  const double every = terminal_ ? kTerminalRedrawSeconds : interval_;
  if (now - last_draw_ < every) return;
  last_draw_ = now;
  const double elapsed = now - start_;
  if (terminal_) {
    session_.log.set_status(session_.log.program() + ": " + progress_text(state, elapsed));
  } else {
    session_.log.info("progress: " + progress_text(state, elapsed) + ", " +
                      human_duration(elapsed) + " elapsed");
  }
}

}  // namespace cudaagent
