// RecordSink: where records go. stdout or a file; a file is written under a temporary name and
// renamed into place by commit(), so a killed run never leaves a half-written output under the
// real name; a run that stops early keeps what it finished under FILE.partial (keep_partial()).
// A closed downstream pipe is reported as such, so tools can end quietly.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cudaagent/base/session.h"
#include "cudaagent/base/status.h"
#include "cudaagent/records/stage_end.h"

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
  // For a run that did not complete (a stop signal, a failure): flushes, syncs and renames the
  // temporary file to "PATH.partial", so the records finished so far are kept under a name that
  // says they are not the whole output, and never under PATH. Returns that name, or "" when
  // there is none (stdout, a device, nothing written: the temporary file is removed).
  Result<std::string> keep_partial();

  // True once a write failed with EPIPE: the reader downstream has gone away.
  bool pipe_closed() const;
  // True for pipes and terminals, where a reader waits on each record; false for files.
  bool interactive() const;
  // True when the sink is a terminal (records and a status line on stderr may share it).
  bool terminal() const;
  // Whether the reader of a pipe has gone away, found without writing (poll reports POLLERR on
  // a pipe whose read end is closed), so a stage waiting on slow work can stop before its next
  // record. Also sets pipe_closed(). Always false for files and terminals.
  bool reader_gone();
  const std::string& path() const;

 private:
  struct State;
  explicit RecordSink(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The end of a run that writes through one sink by itself (a stage that does not use the record
// driver): commits the output when the run completed, or, when a stop request cut it short
// (session.stop_signal), keeps what it wrote as PATH.partial and says so on the session's log.
// kPipeClosed when the reader downstream went away.
Result<StageEnd> finish_sink(RecordSink& sink, Session& session);

}  // namespace cudaagent
