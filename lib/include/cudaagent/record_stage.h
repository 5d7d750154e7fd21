// The driver shared by every per-record stage: read records from the inputs, validate them, hand
// each well-formed one to the stage, and write the record with the stage's key added (or an error
// record), in input order. Malformed lines become error records; the bad-line cap, sharding,
// progress, signals and the "durable before released" hook are handled here once.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "cudaagent/cli.h"
#include "cudaagent/session.h"
#include "cudaagent/status.h"

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
  };
  Kind kind = Kind::kPassThrough;
  std::string value_json;
  std::string reason;

  static RecordEdit set_key(std::string json) { return {Kind::kSetKey, std::move(json), {}}; }
  static RecordEdit pass_through() { return {Kind::kPassThrough, {}, {}}; }
  static RecordEdit error(std::string why) { return {Kind::kError, {}, std::move(why)}; }
  static RecordEdit drop() { return {Kind::kDrop, {}, {}}; }
};

class RecordStage {
 public:
  virtual ~RecordStage() = default;
  // The stage's name in error records and its top-level key ("reward").
  virtual std::string_view key() const = 0;
  virtual RecordEdit process(const InputRecord& record) = 0;
  // Called before a batch of outputs is written downstream; a stage with a store commits here,
  // so nothing is released that is not durable. A failure ends the run (exit 1).
  virtual Status before_release() { return Status::ok(); }
};

struct StageCounts {
  std::uint64_t records = 0;       // well-formed records handled by this shard
  std::uint64_t edited = 0;        // records written with the stage's key set
  std::uint64_t stage_errors = 0;  // records the stage turned into error records
  std::uint64_t bad_lines = 0;     // malformed lines
  std::uint64_t dropped = 0;       // records the stage filtered out (RecordEdit::kDrop)
};

// Runs `stage` over `options.inputs` (stdin when empty). Records of other shards are skipped.
// Returns kCompleted after the whole input, kPipeClosed when the output's reader went away, or a
// Status when the stage could not do its job (unreadable input, write error, too many bad lines,
// before_release failed). On a stop signal it returns after flushing complete records.
// `counts`, when given, receives the tallies.
Result<StageEnd> run_record_stage(RecordStage& stage, const CommonOptions& options,
                                  Session& session, StageCounts* counts = nullptr);

}  // namespace cudaagent
