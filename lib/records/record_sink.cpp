// Output with a 1 MiB buffer, write(2) loops that survive EINTR and short writes, and the
// temp-file-and-rename protocol for -o FILE.
#include "cudaagent/records/record_sink.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cudaagent/base/files.h"

namespace cudaagent {
namespace {
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
}

struct RecordSink::State {
  std::string path;
  std::string temp_path;  // empty for stdout
  int fd = -1;
  bool owns_fd = false;  // a device or FIFO opened in place (no temporary file)
  bool committed = false;
  bool pipe_closed = false;
  bool interactive = false;
  bool terminal = false;
  bool is_pipe = false;
  bool wrote = false;  // any bytes reached the file
  std::string buffer;

  ~State() {
    // Records already handed to stdout are complete: deliver them even when the run failed
    // (a temporary file, by contrast, is discarded below so no partial -o file appears).
    if (temp_path.empty() && !buffer.empty() && !pipe_closed) (void)write_all(buffer.data(), buffer.size());
    if (owns_fd && fd >= 0) ::close(fd);
    if (!temp_path.empty()) {
      if (fd >= 0) ::close(fd);
      if (!committed) ::unlink(temp_path.c_str());
    }
  }

  std::string subject() const { return path == "-" ? "stdout" : "'" + path + "'"; }

  Status write_all(const char* data, std::size_t size) {
    while (size > 0) {
      const ssize_t n = ::write(fd, data, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EPIPE) pipe_closed = true;
        return Status::error("cannot write " + subject() + ": " + std::strerror(errno));
      }
      data += n;
      size -= static_cast<std::size_t>(n);
      wrote = true;
    }
    return Status::ok();
  }
};

RecordSink::RecordSink(std::unique_ptr<State> state) : state_(std::move(state)) {}
RecordSink::RecordSink(RecordSink&&) noexcept = default;
RecordSink& RecordSink::operator=(RecordSink&&) noexcept = default;
RecordSink::~RecordSink() = default;

Result<RecordSink> RecordSink::open(const std::string& path) {
  auto state = std::make_unique<State>();
  state->path = path;
  struct stat existing {};
  const bool special = path != "-" && ::stat(path.c_str(), &existing) == 0 &&
                       !S_ISREG(existing.st_mode);
  if (path == "-") {
    state->fd = STDOUT_FILENO;
  } else if (special) {
    // A device or FIFO (/dev/null, a named pipe) is written in place: renaming a file over it
    // would replace the device node.
    state->fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (state->fd < 0) return Status::error("cannot open '" + path + "': " + std::strerror(errno));
    state->owns_fd = true;
  } else {
    state->temp_path = temporary_sibling(path);
    state->fd = ::open(state->temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (state->fd < 0) {
      return Status::error("cannot create '" + path + "': " + std::strerror(errno));
    }
  }
  struct stat st {};
  if (::fstat(state->fd, &st) == 0) {
    state->interactive = S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode);
    state->is_pipe = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
    state->terminal = ::isatty(state->fd) == 1;
  }
  state->buffer.reserve(kBufferBytes);
  return RecordSink(std::move(state));
}

Status RecordSink::write(std::string_view records) {
  State& s = *state_;
  if (s.buffer.size() + records.size() > kBufferBytes) {
    if (auto status = flush(); !status) return status;
    if (records.size() >= kBufferBytes) return s.write_all(records.data(), records.size());
  }
  s.buffer.append(records);
  return Status::ok();
}

Status RecordSink::flush() {
  State& s = *state_;
  if (s.buffer.empty()) return Status::ok();
  auto status = s.write_all(s.buffer.data(), s.buffer.size());
  s.buffer.clear();
  return status;
}

Status RecordSink::commit() {
  State& s = *state_;
  if (auto status = flush(); !status) return status;
  if (s.temp_path.empty() || s.committed) return Status::ok();
  if (::fsync(s.fd) != 0 || ::close(s.fd) != 0) {
    s.fd = -1;
    return Status::error("cannot write " + s.subject() + ": " + std::strerror(errno));
  }
  s.fd = -1;
  if (::rename(s.temp_path.c_str(), s.path.c_str()) != 0) {
    return Status::error("cannot rename '" + s.temp_path + "' to " + s.subject() + ": " +
                         std::strerror(errno));
  }
  s.committed = true;
  return Status::ok();
}

Result<std::string> RecordSink::keep_partial() {
  State& s = *state_;
  if (s.temp_path.empty() || s.committed) {
    (void)flush();
    return std::string();
  }
  Status flushed = flush();
  if (::fsync(s.fd) != 0 || ::close(s.fd) != 0) flushed = Status::error(std::strerror(errno));
  s.fd = -1;
  if (!flushed) return Status::error("cannot write " + s.subject() + ": " + flushed.message());
  if (!s.wrote) return std::string();  // the destructor removes the empty temporary file
  const std::string partial = s.path + ".partial";
  if (::rename(s.temp_path.c_str(), partial.c_str()) != 0) {
    return Status::error("cannot rename '" + s.temp_path + "' to '" + partial + "': " +
                         std::strerror(errno));
  }
  s.committed = true;  // nothing left to remove
  return partial;
}

bool RecordSink::reader_gone() {
  State& s = *state_;
  if (s.pipe_closed) return true;
  if (!s.is_pipe || s.fd < 0) return false;
  pollfd watch{s.fd, 0, 0};
  if (::poll(&watch, 1, 0) > 0 && (watch.revents & (POLLERR | POLLHUP)) != 0) s.pipe_closed = true;
  return s.pipe_closed;
}

bool RecordSink::terminal() const { return state_->terminal; }

Result<StageEnd> finish_sink(RecordSink& sink, Session& session) {
  if (sink.pipe_closed()) return StageEnd::kPipeClosed;
  if (session.stop_signal.load() == 0) {
    if (auto status = sink.commit(); !status) {
      return sink.pipe_closed() ? Result<StageEnd>(StageEnd::kPipeClosed) : Result<StageEnd>(status);
    }
    return StageEnd::kCompleted;
  }
  auto kept = sink.keep_partial();
  if (!kept) return kept.status();
  if (!kept.value().empty()) {
    session.log.warn("stopped early: the records written so far are in " + cudaagent::quoted(kept.value()) +
                     ", not " + cudaagent::quoted(sink.path()));
  }
  return StageEnd::kCompleted;
}

bool RecordSink::pipe_closed() const { return state_->pipe_closed; }
bool RecordSink::interactive() const { return state_->interactive; }
const std::string& RecordSink::path() const { return state_->path; }

}  // namespace cudaagent
