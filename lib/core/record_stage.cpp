// The per-record driver. Outputs are held in a small batch so that a stage with a store can make
// them durable (before_release) before anyone downstream sees them; a batch is released when it
// is large or when the input has nothing more buffered, so interactive pipelines see records at
// once and bulk runs still write in large blocks.
#include "cudaagent/record_stage.h"

#include <memory>
#include <optional>

#include "cudaagent/line_reader.h"
#include "cudaagent/progress.h"
#include "cudaagent/record.h"
#include "cudaagent/record_sink.h"

namespace cudaagent {
namespace {

constexpr std::size_t kReleaseRecords = 512;
constexpr std::size_t kReleaseBytes = std::size_t{1} << 20;

bool is_blank(std::string_view bytes) {
  return bytes.find_first_not_of(" \t\r") == std::string_view::npos;
}

class Driver {
 public:
  Driver(RecordStage& stage, const CommonOptions& options, Session& session)
      : stage_(stage), options_(options), session_(session) {}

  Result<StageEnd> run(StageCounts& counts) {
    auto out = RecordSink::open(options_.output);
    if (!out) return out.status();
    out_ = std::make_unique<RecordSink>(std::move(out).value());
    if (!options_.errors.empty()) {
      auto errors = RecordSink::open(options_.errors);
      if (!errors) return errors.status();
      errors_ = std::make_unique<RecordSink>(std::move(errors).value());
    }
    std::vector<std::string> inputs = options_.inputs;
    if (inputs.empty()) inputs.emplace_back("-");

    Progress progress(session_, !options_.quiet);
    const double start = session_.clock.now_seconds();
    std::uint64_t bytes_before = 0;
    for (const std::string& input : inputs) {
      auto reader = LineReader::open(input, options_.max_record_bytes, &session_.stop_signal);
      if (!reader) return reader.status();
      InputLine line;
      for (;;) {
        if (session_.stop_signal.load() != 0) break;
        auto more = reader.value().next(line);
        if (!more) return more.status();
        if (!more.value()) break;
        if (!line.oversized && is_blank(line.bytes)) continue;
        if (!options_.shard.owns(ordinal_++)) continue;
        if (auto status = handle(line, reader.value().name(), counts); !status) return status;
        progress.update(counts.records + counts.bad_lines,
                        bytes_before + reader.value().bytes_consumed(),
                        total_size(inputs, reader.value()));
        if (pending_records_ >= kReleaseRecords || out_pending_.size() >= kReleaseBytes ||
            !reader.value().has_buffered_line()) {
          auto end = release();
          if (!end) return end.status();
          if (end.value() == StageEnd::kPipeClosed) return end;
        }
      }
      bytes_before += reader.value().bytes_consumed();
      if (session_.stop_signal.load() != 0) break;
    }
    auto end = release();
    if (!end || end.value() == StageEnd::kPipeClosed) return end;
    // Complete records are kept even when a signal cut the run short; the exit code says so.
    if (auto status = out_->commit(); !status) return status;
    if (errors_) {
      if (auto status = errors_->commit(); !status) return status;
    }
    session_.log.info(std::to_string(counts.records) + " records (" +
                      std::to_string(counts.stage_errors) + " turned into error records, " +
                      std::to_string(counts.bad_lines) + " malformed lines" +
                      (counts.dropped == 0 ? std::string()
                                           : ", " + std::to_string(counts.dropped) + " dropped") +
                      ") in " +
                      std::to_string(session_.clock.now_seconds() - start).substr(0, 5) + " s");
    return StageEnd::kCompleted;
  }

 private:
  static std::optional<std::uint64_t> total_size(const std::vector<std::string>& inputs,
                                                 const LineReader& reader) {
    return inputs.size() == 1 ? reader.size() : std::nullopt;
  }

  std::string& error_pending() { return errors_ ? err_pending_ : out_pending_; }

  Status handle(const InputLine& line, const std::string& source, StageCounts& counts) {
    const ErrorContext where{stage_.key(), source, line.number};
    if (line.oversized) {
      return bad_line(where, "record of " + std::to_string(line.full_size) +
                                 " bytes exceeds --max-record-bytes (" +
                                 std::to_string(options_.max_record_bytes) + ")",
                      line.bytes, counts);
    }
    auto parsed = parser_.parse(line.bytes);
    if (!parsed) {
      std::string reason = parsed.status().message();
      if (!line.terminated) reason = "torn final line (no newline at end of input): " + reason;
      return bad_line(where, reason, line.bytes, counts);
    }
    InputRecord record{parsed.value(), line.bytes, source, line.number, {}};
    std::string_view id;
    if (!record.object["id"].get(id)) record.id = id;
    ++counts.records;
    const RecordEdit edit = stage_.process(record);
    switch (edit.kind) {
      case RecordEdit::Kind::kSetKey: {
        const bool exists = record.object.at_key(stage_.key()).error() == simdjson::SUCCESS;
        if (auto status = append_with_member(out_pending_, line.bytes, stage_.key(),
                                             edit.value_json, exists);
            !status) {
          append_error_record(error_pending(), where, status.message(), line.bytes, record.id);
          ++counts.stage_errors;
          break;
        }
        out_pending_.push_back('\n');
        ++counts.edited;
        break;
      }
      case RecordEdit::Kind::kPassThrough:
        out_pending_.append(line.bytes).push_back('\n');
        break;
      case RecordEdit::Kind::kError:
        append_error_record(error_pending(), where, edit.reason, line.bytes, record.id);
        ++counts.stage_errors;
        break;
      case RecordEdit::Kind::kDrop:
        ++counts.dropped;
        break;
    }
    ++pending_records_;
    return Status::ok();
  }

  Status bad_line(const ErrorContext& where, const std::string& reason, std::string_view raw,
                  StageCounts& counts) {
    append_error_record(error_pending(), where, reason, raw);
    ++pending_records_;
    ++counts.bad_lines;
    if (options_.max_bad_lines >= 0 &&
        counts.bad_lines > static_cast<std::uint64_t>(options_.max_bad_lines)) {
      (void)release();  // keep what was done; the failure below is what matters
      return Status::error("more than " + std::to_string(options_.max_bad_lines) +
                           " malformed lines, the last at " + quoted(where.source) + " line " +
                           std::to_string(where.line) + " (see --max-bad-lines)");
    }
    return Status::ok();
  }

  // Makes the batch durable (the stage's hook), then writes it downstream.
  Result<StageEnd> release() {
    if (pending_records_ == 0) return StageEnd::kCompleted;
    if (auto status = stage_.before_release(); !status) return status;
    pending_records_ = 0;
    for (auto [sink, pending] : {std::pair{out_.get(), &out_pending_},
                                 std::pair{errors_.get(), &err_pending_}}) {
      if (sink == nullptr) continue;
      auto status = sink->write(*pending);
      pending->clear();
      if (status && sink->interactive()) status = sink->flush();
      if (!status) {
        if (sink->pipe_closed()) return StageEnd::kPipeClosed;
        return status;
      }
    }
    return StageEnd::kCompleted;
  }

  RecordStage& stage_;
  const CommonOptions& options_;
  Session& session_;
  RecordParser parser_;
  std::unique_ptr<RecordSink> out_, errors_;
  std::string out_pending_, err_pending_;
  std::size_t pending_records_ = 0;
  std::uint64_t ordinal_ = 0;
};

}  // namespace

Result<StageEnd> run_record_stage(RecordStage& stage, const CommonOptions& options,
                                  Session& session, StageCounts* counts) {
  StageCounts local;
  Driver driver(stage, options, session);
  return driver.run(counts != nullptr ? *counts : local);
}

}  // namespace cudaagent
