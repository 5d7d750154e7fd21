// The per-record driver. Outputs are held in a small batch so that a stage with a store can make
// them durable (before_release) before anyone downstream sees them; a batch is released when it
// is large or when the input has nothing more buffered, so interactive pipelines see records at
// once and bulk runs still write in large blocks. Stages with slow per-record work hand it to a
// pool of --jobs threads; every record then waits in a queue of slots, in input order, until its
// own work and every earlier one has finished, so the output order never depends on timing.
#include "cudaagent/records/record_stage.h"

#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cudaagent/records/line_reader.h"
#include "cudaagent/records/progress.h"
#include "cudaagent/records/record.h"
#include "cudaagent/records/record_sink.h"

namespace cudaagent {
namespace {

constexpr std::size_t kReleaseRecords = 512;
constexpr std::size_t kReleaseBytes = std::size_t{1} << 20;
constexpr std::size_t kSlotsPerJob = 4;

// Threads that run stage works in submission order. The destructor drops queued works (their
// futures then report broken_promise) and waits for the running ones.
class WorkerPool {
 public:
  explicit WorkerPool(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      queue_.clear();
    }
    wake_.notify_all();
    for (auto& thread : threads_) thread.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  std::future<RecordEdit> submit(RecordStage::Work work) {
    std::packaged_task<RecordEdit()> task(std::move(work));
    auto future = task.get_future();
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
    return future;
  }

  // Drops every work not yet started.
  void cancel_queued() {
    std::lock_guard lock(mutex_);
    queue_.clear();
  }

 private:
  void loop() {
    for (;;) {
      std::packaged_task<RecordEdit()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();  // an exception is stored in the future and rethrown in the driver's thread
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<RecordEdit()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// One input record waiting for its turn to be written.
struct Slot {
  std::string text;    // the record's bytes (the reader's buffer is reused)
  std::string source;  // input path
  std::uint64_t line = 0;
  std::string id;
  bool key_exists = false;
  bool bad_line = false;  // a malformed line: its error record counts as a bad line
  std::future<RecordEdit> edit;
};

bool is_blank(std::string_view bytes) {
  return bytes.find_first_not_of(" \t\r") == std::string_view::npos;
}

class Driver {
 public:
  Driver(RecordStage& stage, const CommonOptions& options, Session& session)
      : stage_(stage), options_(options), session_(session) {}

  Result<StageEnd> run(StageCounts& counts) {
    counts_ = &counts;
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
    if (session_.stop_signal.load() != 0 && pool_) pool_->cancel_queued();
    drain(slots_.size());
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
                      (counts.dropped > 0 ? ", " + std::to_string(counts.dropped) + " dropped"
                                          : std::string()) +
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
    const bool exists = record.object.at_key(stage_.key()).error() == simdjson::SUCCESS;
    RecordStage::Work work = stage_.prepare(record);
    if (work && options_.jobs > 1) {
      if (!pool_) pool_ = std::make_unique<WorkerPool>(options_.jobs);
      slots_.push_back(Slot{std::string(line.bytes), source, line.number, std::string(record.id),
                            exists, false, pool_->submit(std::move(work))});
      // Write what is finished at the front; wait only when the window is full.
      const std::size_t window = kSlotsPerJob * static_cast<std::size_t>(options_.jobs);
      drain(slots_.size() >= window ? slots_.size() - window + 1 : 0);
      return Status::ok();
    }
    const RecordEdit edit = work ? work() : stage_.process(record);
    if (!slots_.empty()) {  // earlier records are still in flight: this one waits its turn
      std::promise<RecordEdit> ready;
      ready.set_value(edit);
      slots_.push_back(Slot{std::string(line.bytes), source, line.number, std::string(record.id),
                            exists, false, ready.get_future()});
      return Status::ok();
    }
    apply(edit, where, line.bytes, record.id, exists);
    return Status::ok();
  }

  // Appends the output for one record's edit.
  void apply(const RecordEdit& edit, const ErrorContext& where, std::string_view text,
             std::string_view id, bool key_exists) {
    switch (edit.kind) {
      case RecordEdit::Kind::kSetKey: {
        if (auto status = append_with_member(out_pending_, text, stage_.key(), edit.value_json,
                                             key_exists);
            !status) {
          append_error_record(error_pending(), where, status.message(), text, id);
          ++counts_->stage_errors;
          break;
        }
        out_pending_.push_back('\n');
        ++counts_->edited;
        break;
      }
      case RecordEdit::Kind::kPassThrough:
        out_pending_.append(text).push_back('\n');
        break;
      case RecordEdit::Kind::kError:
        append_error_record(error_pending(), where, edit.reason, text, id);
        ++counts_->stage_errors;
        break;
      case RecordEdit::Kind::kDrop:
        ++counts_->dropped;
        break;
    }
    ++pending_records_;
  }

  // Writes the slots at the front whose work has finished, waiting for the first `at_least` of
  // them. A slot whose work was dropped (a stop signal) writes nothing.
  void drain(std::size_t at_least) {
    while (!slots_.empty()) {
      Slot& slot = slots_.front();
      if (at_least == 0 &&
          slot.edit.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        return;
      }
      std::optional<RecordEdit> edit;
      try {
        edit = slot.edit.get();
      } catch (const std::future_error&) {  // dropped before it started
      }
      const ErrorContext where{stage_.key(), slot.source, slot.line};
      if (edit && slot.bad_line) {
        append_error_record(error_pending(), where, edit->reason, slot.text);
        ++pending_records_;
      } else if (edit) {
        apply(*edit, where, slot.text, slot.id, slot.key_exists);
      }
      slots_.pop_front();
      if (at_least > 0) --at_least;
    }
  }

  Status bad_line(const ErrorContext& where, const std::string& reason, std::string_view raw,
                  StageCounts& counts) {
    ++counts.bad_lines;
    if (!slots_.empty()) {  // keep input order behind records still in flight
      std::promise<RecordEdit> ready;
      ready.set_value(RecordEdit::error(reason));
      slots_.push_back(Slot{std::string(raw), std::string(where.source), where.line, {}, false,
                            true, ready.get_future()});
    } else {
      append_error_record(error_pending(), where, reason, raw);
      ++pending_records_;
    }
    if (options_.max_bad_lines >= 0 &&
        counts.bad_lines > static_cast<std::uint64_t>(options_.max_bad_lines)) {
      if (pool_) pool_->cancel_queued();
      drain(slots_.size());
      (void)release();  // keep what was done; the failure below is what matters
      return Status::error("more than " + std::to_string(options_.max_bad_lines) +
                           " malformed lines, the last at " + cudaagent::quoted(where.source) + " line " +
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
  StageCounts* counts_ = nullptr;
  std::unique_ptr<RecordSink> out_, errors_;
  std::string out_pending_, err_pending_;
  std::size_t pending_records_ = 0;
  std::uint64_t ordinal_ = 0;
  // Records in flight, in input order, and the threads running their works (made on first use).
  // Last, so the threads are joined before anything a work's result would be written to goes.
  std::deque<Slot> slots_;
  std::unique_ptr<WorkerPool> pool_;
};

}  // namespace

Result<StageEnd> run_record_stage(RecordStage& stage, const CommonOptions& options,
                                  Session& session, StageCounts* counts) {
  StageCounts local;
  Driver driver(stage, options, session);
  return driver.run(counts != nullptr ? *counts : local);
}

}  // namespace cudaagent
