// Chunked line splitting with memchr over a growing buffer. A line that outgrows the record cap is
// not buffered whole: its first part is kept for the error record and the rest is skipped as it
// streams past, so a 10 GB line costs no more memory than the cap.
#include "cudaagent/records/line_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace cudaagent {

static_assert(kLinePadding >= simdjson::SIMDJSON_PADDING, "lines must carry simdjson's padding");

namespace {
constexpr std::size_t kChunk = std::size_t{1} << 20;  // one read() asks for up to 1 MiB
}

struct LineReader::State {
  std::string name;
  int fd = -1;
  bool owns_fd = false;
  std::size_t max_line = 0;
  const std::atomic<int>* stop = nullptr;
  std::vector<char> buffer;     // capacity + kLinePadding; [begin, end) holds unread bytes
  std::size_t begin = 0, end = 0, scanned = 0;  // scanned: bytes after begin known to hold no '\n'
  bool eof = false;
  bool at_start = true;
  std::uint64_t line_number = 0;
  std::uint64_t consumed = 0;
  std::optional<std::uint64_t> size;
  std::vector<char> prefix;     // the kept first part of an oversized line (+ padding)

  ~State() {
    if (owns_fd && fd >= 0) ::close(fd);
  }

  // Keeps the first part of an oversized line (enough for an error record's raw prefix).
  void keep_prefix(std::string_view bytes) {
    const std::size_t keep = std::min<std::size_t>({bytes.size(), max_line, 4096});
    prefix.assign(bytes.data(), bytes.data() + keep);
    prefix_size = keep;
    prefix.resize(keep + kLinePadding);
  }
  std::string_view prefix_view() const { return std::string_view(prefix.data(), prefix_size); }
  InputLine oversized_line(std::string_view bytes, std::uint64_t total, bool terminated) {
    keep_prefix(bytes);
    return InputLine{++line_number, prefix_view(), terminated, true, total};
  }
  std::size_t prefix_size = 0;

  std::size_t capacity() const { return buffer.size() - kLinePadding; }
  std::string subject() const { return name == "-" ? std::string("stdin") : "'" + name + "'"; }
  bool regular = false;  // a regular file: reads never wait

  // Reads more bytes after `end`, compacting or growing the buffer first. Returns false at EOF
  // or on stop; a Status on error.
  Result<bool> fill() {
    if (begin > 0) {
      std::memmove(buffer.data(), buffer.data() + begin, end - begin);
      end -= begin;
      begin = 0;
    }
    if (capacity() - end < kChunk / 4) {
      buffer.resize(capacity() * 2 + kLinePadding);
    }
    for (;;) {
      // With a stop request to watch, wait in short polls so that a signal delivered to another
      // thread (which does not interrupt this read) still ends the wait.
      while (stop != nullptr && !regular) {
        if (stop->load() != 0) return false;
        pollfd watch{fd, POLLIN, 0};
        const int ready = ::poll(&watch, 1, static_cast<int>(kReadPollSeconds * 1000));
        if (ready > 0) break;
        if (ready < 0 && errno != EINTR) {
          return Status::error("cannot poll " + subject() + ": " + std::strerror(errno));
        }
      }
      const ssize_t n = ::read(fd, buffer.data() + end, capacity() - end);
      if (n > 0) {
        end += static_cast<std::size_t>(n);
        consumed += static_cast<std::uint64_t>(n);
        return true;
      }
      if (n == 0) {
        eof = true;
        return false;
      }
      if (errno == EINTR) {
        if (stop != nullptr && stop->load() != 0) return false;
        continue;
      }
      return Status::error("cannot read " + subject() + ": " + std::strerror(errno));
    }
  }
};

LineReader::LineReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
LineReader::LineReader(LineReader&&) noexcept = default;
LineReader& LineReader::operator=(LineReader&&) noexcept = default;
LineReader::~LineReader() = default;

Result<LineReader> LineReader::open(const std::string& path, std::size_t max_line_bytes,
                                    const std::atomic<int>* stop) {
  auto state = std::make_unique<State>();
  state->name = path;
  state->max_line = max_line_bytes;
  state->stop = stop;
  if (path == "-") {
    state->fd = STDIN_FILENO;
  } else {
    state->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (state->fd < 0) return Status::error("cannot open '" + path + "': " + std::strerror(errno));
    state->owns_fd = true;
  }
  struct stat st {};
  if (::fstat(state->fd, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::error("cannot read '" + path + "': is a directory");
    if (S_ISREG(st.st_mode)) {
      state->size = static_cast<std::uint64_t>(st.st_size);
      state->regular = true;
    }
  }
  state->buffer.resize(kChunk * 2 + kLinePadding);
  return LineReader(std::move(state));
}

Result<bool> LineReader::next(InputLine& line) {
  State& s = *state_;
  for (;;) {
    if (s.at_start && (s.end - s.begin >= 3 || s.eof)) {
      s.at_start = false;
      if (s.end - s.begin >= 3 && std::memcmp(s.buffer.data() + s.begin, "\xEF\xBB\xBF", 3) == 0) {
        s.begin += 3;
      }
    }
    if (!s.at_start) {
      char* base = s.buffer.data();
      const std::size_t from = s.begin + s.scanned;
      const void* hit = s.end > from ? std::memchr(base + from, '\n', s.end - from) : nullptr;
      if (hit != nullptr) {
        const auto newline = static_cast<std::size_t>(static_cast<const char*>(hit) - base);
        std::size_t length = newline - s.begin;
        if (length > 0 && base[s.begin + length - 1] == '\r') --length;
        if (length > s.max_line) {
          line = s.oversized_line(std::string_view(base + s.begin, length), length, true);
          s.begin = newline + 1;
          s.scanned = 0;
          return true;
        }
        line = InputLine{++s.line_number, std::string_view(base + s.begin, length), true, false,
                         length};
        s.begin = newline + 1;
        s.scanned = 0;
        return true;
      }
      s.scanned = s.end - s.begin;
      if (s.scanned > s.max_line) {
        // Oversized: remember a prefix, then skip to the next newline as the bytes stream past.
        std::uint64_t total = s.scanned;
        s.keep_prefix(std::string_view(base + s.begin, s.scanned));
        s.begin = s.end = s.scanned = 0;
        bool found = false;
        for (;;) {
          auto more = s.fill();
          if (!more) return more.status();
          if (!more.value()) break;
          const void* nl = std::memchr(s.buffer.data(), '\n', s.end);
          if (nl != nullptr) {
            const auto at = static_cast<std::size_t>(static_cast<const char*>(nl) - s.buffer.data());
            total += at;
            s.begin = at + 1;
            found = true;
            break;
          }
          total += s.end;
          s.end = 0;
        }
        line = InputLine{++s.line_number, s.prefix_view(), found, true, total};
        return true;
      }
      if (s.eof) {
        if (s.begin == s.end) return false;
        std::size_t length = s.end - s.begin;
        line = InputLine{++s.line_number, std::string_view(base + s.begin, length), false, false,
                         length};
        s.begin = s.end;
        s.scanned = 0;
        return true;
      }
    }
    auto more = s.fill();
    if (!more) return more.status();
    if (!more.value() && !s.eof) return false;  // stopped by a signal
  }
}

bool LineReader::has_buffered_line() const {
  const State& s = *state_;
  const std::size_t from = s.begin + s.scanned;
  return s.end > from && std::memchr(s.buffer.data() + from, '\n', s.end - from) != nullptr;
}

Result<bool> LineReader::wait(double seconds, int wake_fd) {
  const State& s = *state_;
  if (s.eof || s.regular || has_buffered_line()) return true;
  pollfd watch[2] = {{s.fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  const int ready = ::poll(watch, wake_fd >= 0 ? 2 : 1, static_cast<int>(seconds * 1000));
  if (ready < 0) {
    if (errno == EINTR) return false;
    return Status::error("cannot poll " + s.subject() + ": " + std::strerror(errno));
  }
  return (watch[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

const std::string& LineReader::name() const { return state_->name; }
std::uint64_t LineReader::bytes_consumed() const { return state_->consumed; }
std::optional<std::uint64_t> LineReader::size() const { return state_->size; }

}  // namespace cudaagent
