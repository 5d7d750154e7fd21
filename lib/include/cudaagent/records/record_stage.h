// The driver shared by every per-record stage: read records from the inputs, validate them, hand
// each well-formed one to the stage, and write the record with the stage's key added (or an error
// record), in input order. Malformed lines become error records; the bad-line cap, sharding,
// progress, signals, --jobs worker threads and the "durable before released" hook are handled
// here once.
//
// What the driver guarantees:
//   Order and streaming. Outputs keep input order. A record is written the moment it and every
//     record before it are final: to a pipe or terminal flushed at once, to a file in blocks. A
//     fast stage batches while more input is already buffered (up to 512 records or 1 MiB, a
//     fraction of a second); a slow one (slow_records()) releases every record as it becomes
//     final. The driver never sits in a read while a finished record waits, so the first record
//     of a slow stage reaches the next stage as soon as it is done.
//   Stops. On a stop request (Session::stop_signal: SIGINT, SIGTERM, SIGHUP, or the reader
//     downstream going away, which the driver notices without writing) works not yet started are
//     dropped, running ones are expected to end within a fraction of a second (the lower layers
//     honour the same flag), every record that was final is written (and was made durable by
//     before_release first), and records cut short (RecordEdit::interrupted) are not written at
//     all. An -o file is then not renamed into place: what was written is kept as FILE.partial.
//   Input that is not JSON Lines. Unless --max-bad-lines is negative, an input whose first eight
//     records (or all of them, when it has fewer) are all malformed fails the run (exit 1) at
//     once, with a message: that is a wrong file, not a few bad lines.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "cudaagent/base/session.h"
#include "cudaagent/base/status.h"
#include "cudaagent/records/cli.h"

namespace cudaagent {

struct InputRecord {
  simdjson::dom::object object;  // the parsed record (valid during process())
  std::string_view text;         // its bytes
  std::string_view source;       // input path, "-" for stdin
  std::uint64_t line = 0;        // 1-based line within the source
  std::string_view id;           // the record's "id" when it is a string, else empty
};

// What a stage decided for one record.
struct RecordEdit {
  enum class Kind {
    kSetKey,       // write the record with the stage's key set to `value_json`
    kPassThrough,  // write the record unchanged
    kError,        // write an error record with `reason` instead of the record
    kDrop,         // write nothing downstream: the stage filtered the record out (and keeps its
                   // own account of it, e.g. in a side file written from before_release)
    kInterrupted,  // a stop request cut the record's work short: it has no result, and nothing
                   // is written for it (a re-run does it again); counted as unfinished
  };
  Kind kind = Kind::kPassThrough;
  std::string value_json;
  std::string reason;

  static RecordEdit set_key(std::string json) { return {Kind::kSetKey, std::move(json), {}}; }
  static RecordEdit pass_through() { return {Kind::kPassThrough, {}, {}}; }
  static RecordEdit error(std::string why) { return {Kind::kError, {}, std::move(why)}; }
  static RecordEdit drop() { return {Kind::kDrop, {}, {}}; }
  static RecordEdit interrupted() { return {Kind::kInterrupted, {}, {}}; }
};

class RecordStage {
 public:
  virtual ~RecordStage() = default;
  // The stage's name in error records and its top-level key ("reward").
  virtual std::string_view key() const = 0;
  virtual RecordEdit process(const InputRecord& record) = 0;

  // Work that computes one record's edit away from the driver's thread.
  using Work = std::function<RecordEdit()>;
  // For stages whose per-record work is slow and independent (a sandboxed process per record).
  // Called in the driver's thread, in input order, before process(): a non-empty Work replaces
  // process() for this record. With --jobs N > 1 the driver runs works on N worker threads while
  // it reads on (at most 4 N records in flight) and still writes every output in input order;
  // with --jobs 1 it runs each work at once in the driver's thread. A work must not refer to
  // `record` (its memory is reused when prepare returns: copy what it needs) and must be safe to
  // run beside other works and beside before_release(). On a stop request, works not yet started
  // are dropped and running ones are waited for: a work should pass &session.stop_signal to what
  // it waits on, and return RecordEdit::interrupted() when the stop cut it short. The default
  // returns an empty Work.
  virtual Work prepare(const InputRecord& record) {
    (void)record;
    return {};
  }

  // True for a stage whose records can each take long (a sandboxed run per record): the driver
  // then releases every record as soon as it is final, instead of batching while more input is
  // buffered. Fast stages (reward, dedup) keep the default and write in blocks.
  virtual bool slow_records() const { return false; }

  // Called in the driver's thread before a batch of outputs is written downstream, once the
  // works of every record in the batch have returned; a stage with a store commits here, so
  // nothing is released that is not durable. A failure ends the run (exit 1).
  virtual Status before_release() { return Status::ok(); }

  // Why the stage can no longer do its job whatever the records are (its tools broke: record
  // after record failed for a reason outside the records), or "" while it can. Once it is not
  // empty the driver ends the run as for a stop request (works not started are dropped, running
  // ones waited for, every final record written, an -o file kept as FILE.partial) and fails it
  // (exit 1) with this reason, instead of turning the rest of the input into error records.
  // Called in the driver's thread while works run: cheap and thread-safe.
  virtual std::string given_up() const { return {}; }
};

struct StageCounts {
  std::uint64_t records = 0;       // well-formed records handled by this shard
  std::uint64_t edited = 0;        // records written with the stage's key set
  std::uint64_t stage_errors = 0;  // records the stage turned into error records
  std::uint64_t bad_lines = 0;     // malformed lines
  std::uint64_t dropped = 0;       // records the stage filtered out (RecordEdit::kDrop)
  std::uint64_t other_shards = 0;  // records left to the other shards (--shard)
  std::uint64_t unfinished = 0;    // records a stop cut short or left unstarted: not written
};

// Runs `stage` over `options.inputs` (stdin when empty). Records of other shards are skipped (and
// counted in the summary). Returns kCompleted after the whole input, kPipeClosed when the output's
// reader went away, or a Status when the stage could not do its job (unreadable input, write
// error, too many bad lines, not JSON Lines, before_release failed). On a stop request it returns
// kCompleted after writing every final record (the exit code comes from the signal). `counts`,
// when given, receives the tallies.
Result<StageEnd> run_record_stage(RecordStage& stage, const CommonOptions& options,
                                  Session& session, StageCounts* counts = nullptr);

// For a mode that reads records to summarise or export them rather than pass them on: hands every
// well-formed record of `options.inputs` (stdin when empty; this shard's only) to `each`, in
// order, and counts malformed lines in `bad_lines` (each also named in a warning). A Status when
// an input cannot be read, is not JSON Lines (the driver's rule), the lines exceed
// --max-bad-lines, or `each` fails. A stop request ends it early with Ok.
Status read_records(const CommonOptions& options, Session& session, std::string_view stage,
                    const std::function<Status(const InputRecord&)>& each,
                    std::uint64_t* bad_lines = nullptr);

}  // namespace cudaagent
