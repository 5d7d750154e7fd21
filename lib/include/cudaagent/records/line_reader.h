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
  // `stop`, when given, is polled after an interrupted read so a signal ends the read promptly.
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

  const std::string& name() const;          // the path, or "-" for stdin
  std::uint64_t bytes_consumed() const;     // bytes read from the source so far
  std::optional<std::uint64_t> size() const;  // total size when the source is a regular file

 private:
  struct State;
  explicit LineReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace cudaagent
