// LineReader: streams '\n'-terminated lines from a file or stdin in large chunks, without loading
// the input. Every line it hands out is followed by at least kLinePadding readable bytes, so simdjson
// can parse it in place (zero copies on the pass-through path).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cudaagent/base/status.h"

namespace cudaagent {

inline constexpr std::size_t kLinePadding = 64;  // >= SIMDJSON_PADDING (checked in the .cpp)
inline constexpr double kReadPollSeconds = 0.1;   // how often a waiting read looks at `stop`

struct InputLine {
  std::uint64_t number = 0;   // 1-based line number within its source
  std::string_view bytes;     // without the '\n' and without one trailing '\r'
  bool terminated = true;     // false: the source ended without a final '\n'
  // The line was longer than the record cap: `bytes` holds only its first part and the rest was
  // skipped; `full_size` is how long it really was.
  bool oversized = false;
  std::uint64_t full_size = 0;
};

class LineReader {
 public:
  // Opens `path` ("-" means stdin). Lines longer than `max_line_bytes` are reported as oversized.
  // `stop`, when given, is looked at while a read waits (every kReadPollSeconds), so a stop request
  // ends the read promptly even when the signal was delivered to another thread.
  static Result<LineReader> open(const std::string& path, std::size_t max_line_bytes,
                                 const std::atomic<int>* stop = nullptr);
  LineReader(LineReader&&) noexcept;
  LineReader& operator=(LineReader&&) noexcept;
  ~LineReader();

  // The next line: true and `line` filled; false at the end of input (or when `stop` became
  // non-zero); a Status for a read error. `line.bytes` is valid until the next call. A UTF-8 byte
  // order mark at the very start of the input is skipped.
  Result<bool> next(InputLine& line);

  // Whether a complete line is already buffered, i.e. next() will not block. Writers use this to
  // flush before waiting for input, so a downstream reader sees records promptly.
  bool has_buffered_line() const;

  // Waits up to `seconds` until next() has something to give without waiting for the source (a
  // buffered line, readable bytes, or the end of input), or until `wake_fd` (when >= 0) is
  // readable. True when the input is ready; false when the time ran out or `wake_fd` woke it.
  // A Status when the source cannot be polled.
  Result<bool> wait(double seconds, int wake_fd = -1);

  const std::string& name() const;          // the path, or "-" for stdin
  std::uint64_t bytes_consumed() const;     // bytes read from the source so far
  std::optional<std::uint64_t> size() const;  // total size when the source is a regular file

 private:
  struct State;
  explicit LineReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace cudaagent
