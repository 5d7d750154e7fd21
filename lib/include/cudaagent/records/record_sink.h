// RecordSink: where records go. stdout or a file; a file is written under a temporary name and
// renamed into place by commit(), so a killed run never leaves a half-written output under the
// real name. A closed downstream pipe is reported as such, so tools can end quietly.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cudaagent/base/status.h"

namespace cudaagent {

class RecordSink {
 public:
  // "-" is stdout (never closed by us). A device or FIFO (/dev/null) is written in place. Any
  // other path: a temporary file beside it, renamed over it by commit().
  static Result<RecordSink> open(const std::string& path);
  RecordSink(RecordSink&&) noexcept;
  RecordSink& operator=(RecordSink&&) noexcept;
  // Removes an uncommitted temporary file; never throws.
  ~RecordSink();

  // Buffers bytes (whole '\n'-terminated records); writes when the buffer is large.
  Status write(std::string_view records);
  // Writes out everything buffered. Cheap when the buffer is empty.
  Status flush();
  // Flushes, syncs and renames the temporary file into place (stdout: flush only).
  Status commit();

  // True once a write failed with EPIPE: the reader downstream has gone away.
  bool pipe_closed() const;
  // True for pipes and terminals, where a reader waits on each record; false for files.
  bool interactive() const;
  const std::string& path() const;

 private:
  struct State;
  explicit RecordSink(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace cudaagent
