// The per-record driver. Outputs are held in a small batch so that a stage with a store can make
// them durable (before_release) before anyone downstream sees them. Key design choice: the
// driver's thread never blocks for long on one thing. Where it would wait (for input, for a
// work, for the window of works in flight to move) it waits at most kWaitSeconds on the input
// and the pool's completion eventfd together, and between waits it writes every record that has
// become final, notices a reader downstream that went away, looks at the stop request and
// redraws the progress. Stage works run on a pool of --jobs threads; every record waits in a
// queue of slots, in input order, until its own work and every earlier one has finished, so the
// output order never depends on timing.
#include "cudaagent/records/record_stage.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cudaagent/base/unique_fd.h"
#include "cudaagent/records/line_reader.h"
#include "cudaagent/records/progress.h"
#include "cudaagent/records/record.h"
#include "cudaagent/records/record_sink.h"

namespace cudaagent {
namespace {

constexpr std::size_t kReleaseRecords = 512;
constexpr std::size_t kReleaseBytes = std::size_t{1} << 20;
constexpr std::size_t kSlotsPerJob = 4;
// The longest the driver's thread waits on one thing before it looks around again.
constexpr double kWaitSeconds = 0.1;
// An input whose first kSniffLines records are all malformed is not JSON Lines.
constexpr std::uint64_t kSniffLines = 8;

// Threads that run stage works in submission order. Each finished work makes done_fd()
// readable, so the driver can wait on it together with its input. The destructor drops queued
// works (their futures then report broken_promise) and waits for the running ones.
class WorkerPool {
 public:
  explicit WorkerPool(int threads) : done_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
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

  // Readable once a work has finished since the last clear_done(); -1 if the eventfd failed
  // (the driver then simply looks every kWaitSeconds).
  int done_fd() const { return done_.get(); }
  void clear_done() {
    std::uint64_t count = 0;
    if (done_.is_open()) (void)!::read(done_.get(), &count, sizeof count);
  }
  // Waits up to `seconds` for a work to finish.
  void wait_done(double seconds) {
    pollfd watch{done_.get(), POLLIN, 0};
    if (done_.is_open()) {
      (void)::poll(&watch, 1, static_cast<int>(seconds * 1000));
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    }
    clear_done();
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
      const std::uint64_t one = 1;
      if (done_.is_open()) (void)!::write(done_.get(), &one, sizeof one);
    }
  }

  UniqueFd done_;
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

std::string signal_name(int signal_number) {
  const char* name = ::sigabbrev_np(signal_number);
  return "signal " + std::to_string(signal_number) + (name != nullptr ? " (SIG" + std::string(name) + ")" : "");
}

// The total size of the inputs when every one is a regular file (for the progress estimate).
std::optional<std::uint64_t> total_size(const std::vector<std::string>& inputs) {
  std::uint64_t total = 0;
  for (const std::string& input : inputs) {
    struct stat st {};
    const int known = input == "-" ? ::fstat(STDIN_FILENO, &st) : ::stat(input.c_str(), &st);
    if (known != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    total += static_cast<std::uint64_t>(st.st_size);
  }
  return total;
}

class Driver {
 public:
  Driver(RecordStage& stage, const CommonOptions& options, Session& session)
      : stage_(stage),
        options_(options),
        session_(session),
        progress_(session, !options.quiet, options.progress_interval) {}

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
    inputs_ = options_.inputs;
    if (inputs_.empty()) inputs_.emplace_back("-");
    total_bytes_ = total_size(inputs_);
    const double start = session_.clock.now_seconds();

    Result<StageEnd> end = read_all();
    const bool completed = end && end.value() == StageEnd::kCompleted && !stopping();
    // Whatever happened, every record that is final is written, unless nobody reads any more.
    finish_slots(!completed);
    const bool reader_gone = (end && end.value() == StageEnd::kPipeClosed) ||
                             session_.stop_signal.load() == SIGPIPE;
    if (reader_gone) {
      end = StageEnd::kPipeClosed;
    } else if (auto released = release(); !released) {
      if (end) end = released;
    } else if (released.value() == StageEnd::kPipeClosed && end) {
      end = released;
    }
    if (end && end.value() == StageEnd::kCompleted && !stopping()) {
      if (auto status = out_->commit(); !status) return status;
      if (errors_) {
        if (auto status = errors_->commit(); !status) return status;
      }
    } else {
      keep_partial(*out_);
      if (errors_) keep_partial(*errors_);
    }
    // A closed pipe downstream ends quietly.
    if (!reader_gone) summarize(session_.clock.now_seconds() - start);
    if (std::string why = stage_.given_up(); !why.empty() && end) return Status::error(why);
    return end;
  }

 private:
  // A stop request, or a stage that gave up (RecordStage::given_up).
  bool stopping() const { return session_.stop_signal.load() != 0 || !stage_.given_up().empty(); }

  // Asks every wait of this run (the works' included) to end: the reader downstream is gone.
  void request_stop(int signal_number) {
    int expected = 0;
    session_.stop_signal.compare_exchange_strong(expected, signal_number);
  }

  Result<StageEnd> read_all() {
    for (const std::string& input : inputs_) {
      auto opened = LineReader::open(input, options_.max_record_bytes, &session_.stop_signal);
      if (!opened) return opened.status();
      LineReader& reader = opened.value();
      reader_ = &reader;
      input_records_ = input_bad_ = 0;
      first_bad_reason_.clear();
      InputLine line;
      for (;;) {
        if (stopping()) return StageEnd::kCompleted;
        if (!reader.has_buffered_line()) {
          // About to wait for input: write what is final first, then wait on the input and the
          // works together, looking around between waits.
          if (auto end = settle(); !end || end.value() != StageEnd::kCompleted) return end;
          for (;;) {
            if (stopping()) return StageEnd::kCompleted;
            auto ready = reader.wait(kWaitSeconds, pool_ ? pool_->done_fd() : -1);
            if (!ready) return ready.status();
            if (pool_) pool_->clear_done();
            if (auto end = settle(); !end || end.value() != StageEnd::kCompleted) return end;
            if (ready.value()) break;
          }
        }
        auto more = reader.next(line);
        if (!more) return more.status();
        if (!more.value()) break;
        if (!line.oversized && is_blank(line.bytes)) continue;
        if (!options_.shard.owns(ordinal_++)) {
          ++counts_->other_shards;
          continue;
        }
        ++read_;
        if (auto end = handle(line, reader.name()); !end || end.value() != StageEnd::kCompleted) {
          return end;
        }
        if (stage_.slow_records() && !slots_.empty()) drain(0);  // works that are done
        if (!sniffing() && (pending_records_ >= kReleaseRecords || out_pending_.size() >= kReleaseBytes ||
                            (stage_.slow_records() && pending_records_ > 0))) {
          if (auto end = release(); !end || end.value() != StageEnd::kCompleted) return end;
        }
        tick();
      }
      if (stopping()) return StageEnd::kCompleted;
      if (options_.max_bad_lines >= 0 && input_records_ > 0 && input_bad_ == input_records_) {
        return not_json_lines(reader.name());
      }
      bytes_before_ += reader.bytes_consumed();
      reader_ = nullptr;
    }
    inputs_done_ = true;
    // Every record is read: write each as soon as it is final.
    while (!slots_.empty() && !stopping()) {
      if (auto end = settle(); !end || end.value() != StageEnd::kCompleted) return end;
      if (slots_.empty()) break;
      pool_->wait_done(kWaitSeconds);
    }
    return StageEnd::kCompleted;
  }

  // Writes every record at the front that is final, notices a reader downstream that went away,
  // and redraws the progress. kPipeClosed when the reader is gone.
  Result<StageEnd> settle() {
    drain(0);
    if (!sniffing()) {
      if (auto end = release(); !end || end.value() != StageEnd::kCompleted) return end;
    }
    if (out_->reader_gone() || (errors_ && errors_->reader_gone())) {
      request_stop(SIGPIPE);
      return StageEnd::kPipeClosed;
    }
    tick();
    return StageEnd::kCompleted;
  }

  void tick() {
    ProgressState state;
    state.done = done_;
    state.read = read_;
    if (inputs_done_) {
      state.total = read_;
    } else if (total_bytes_ && *total_bytes_ > 0 && reader_ != nullptr) {
      state.input_fraction = static_cast<double>(bytes_before_ + reader_->bytes_consumed()) /
                             static_cast<double>(*total_bytes_);
    }
    progress_.update(state);
  }

  // While the current input has given only malformed lines (fewer than kSniffLines), nothing is
  // released: the input may turn out not to be JSON Lines at all.
  bool sniffing() const {
    return options_.max_bad_lines >= 0 && input_records_ > 0 && input_bad_ == input_records_ &&
           input_records_ < kSniffLines;
  }

  Status not_json_lines(const std::string& source) const {
    const std::string which = input_records_ >= kSniffLines
                                  ? "none of its first " + std::to_string(kSniffLines) + " lines"
                              : input_records_ == 1 ? "its only line is not"
                                                    : "none of its " + std::to_string(input_records_) + " lines";
    const std::string subject = source == "-" ? std::string("stdin") : cudaagent::quoted(source);
    return Status::error(subject + " is not JSON Lines: " + which +
                         (input_records_ == 1 ? " a JSON object" : " is a JSON object") + " (line 1: " +
                         first_bad_reason_ + "; see --max-bad-lines)");
  }

  std::string& error_pending() { return errors_ ? err_pending_ : out_pending_; }

  Result<StageEnd> handle(const InputLine& line, const std::string& source) {
    StageCounts& counts = *counts_;
    const ErrorContext where{stage_.key(), source, line.number};
    ++input_records_;
    if (line.oversized) {
      return bad_line(where, "record of " + std::to_string(line.full_size) +
                                 " bytes exceeds --max-record-bytes (" +
                                 std::to_string(options_.max_record_bytes) + ")",
                      line.bytes);
    }
    auto parsed = parser_.parse(line.bytes);
    if (!parsed) {
      std::string reason = parsed.status().message();
      if (!line.terminated) reason = "torn final line (no newline at end of input): " + reason;
      return bad_line(where, reason, line.bytes);
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
      // Wait only when the window is full, writing what finishes meanwhile.
      const std::size_t window = kSlotsPerJob * static_cast<std::size_t>(options_.jobs);
      while (slots_.size() >= window && !stopping()) {
        if (auto end = settle(); !end || end.value() != StageEnd::kCompleted) return end;
        if (slots_.size() < window) break;
        pool_->wait_done(kWaitSeconds);
      }
      return StageEnd::kCompleted;
    }
    const RecordEdit edit = work ? work() : stage_.process(record);
    if (!slots_.empty()) {  // earlier records are still in flight: this one waits its turn
      std::promise<RecordEdit> ready;
      ready.set_value(edit);
      slots_.push_back(Slot{std::string(line.bytes), source, line.number, std::string(record.id),
                            exists, false, ready.get_future()});
      return StageEnd::kCompleted;
    }
    apply(edit, where, line.bytes, record.id, exists);
    return StageEnd::kCompleted;
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
      case RecordEdit::Kind::kInterrupted:
        ++counts_->unfinished;
        return;  // nothing to write, nothing done
    }
    ++pending_records_;
    ++done_;
  }

  // Writes the slots at the front whose work has finished, waiting for the first `at_least` of
  // them. A slot whose work was dropped (a stop request) writes nothing.
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
        ++counts_->unfinished;
      }
      const ErrorContext where{stage_.key(), slot.source, slot.line};
      if (edit && slot.bad_line) {
        append_error_record(error_pending(), where, edit->reason, slot.text);
        ++pending_records_;
        ++done_;
      } else if (edit) {
        apply(*edit, where, slot.text, slot.id, slot.key_exists);
      }
      slots_.pop_front();
      if (at_least > 0) --at_least;
    }
  }

  // At the end of a run: works not started are dropped when the run did not complete (a stop, a
  // failure), the running ones waited for (they honour the stop request), and every record that
  // is final is put in the batch.
  void finish_slots(bool incomplete) {
    if (incomplete && pool_) pool_->cancel_queued();
    std::size_t running = 0;
    for (const Slot& slot : slots_) {
      running += slot.edit.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
    }
    const int signal_number = session_.stop_signal.load();
    if (running > 0 && signal_number != 0 && signal_number != SIGPIPE) {
      session_.log.info("stopping on " + signal_name(session_.stop_signal.load()) +
                        ": waiting for " + std::to_string(running) + " running job" +
                        (running == 1 ? "" : "s") + " to end");
    }
    drain(slots_.size());
  }

  Result<StageEnd> bad_line(const ErrorContext& where, const std::string& reason,
                            std::string_view raw) {
    StageCounts& counts = *counts_;
    ++counts.bad_lines;
    ++input_bad_;
    if (first_bad_reason_.empty()) first_bad_reason_ = reason;
    if (!slots_.empty()) {  // keep input order behind records still in flight
      std::promise<RecordEdit> ready;
      ready.set_value(RecordEdit::error(reason));
      slots_.push_back(Slot{std::string(raw), std::string(where.source), where.line, {}, false,
                            true, ready.get_future()});
    } else {
      append_error_record(error_pending(), where, reason, raw);
      ++pending_records_;
      ++done_;
    }
    if (options_.max_bad_lines >= 0 &&
        counts.bad_lines > static_cast<std::uint64_t>(options_.max_bad_lines)) {
      return Status::error("more than " + std::to_string(options_.max_bad_lines) +
                           " malformed lines, the last at " + cudaagent::quoted(where.source) +
                           " line " + std::to_string(where.line) + " (see --max-bad-lines)");
    }
    if (options_.max_bad_lines >= 0 && input_bad_ == kSniffLines && input_records_ == kSniffLines) {
      return not_json_lines(std::string(where.source));
    }
    return StageEnd::kCompleted;
  }

  // Makes the batch durable (the stage's hook), then writes it downstream.
  Result<StageEnd> release() {
    if (pending_records_ == 0) return StageEnd::kCompleted;
    if (auto status = stage_.before_release(); !status) return status;
    pending_records_ = 0;
    // Records to the terminal that shows the status line: take the line away while they print.
    const bool terminal = out_->terminal() && session_.log.terminal();
    if (terminal) session_.log.hide_status();
    for (auto [sink, pending] : {std::pair{out_.get(), &out_pending_},
                                 std::pair{errors_.get(), &err_pending_}}) {
      if (sink == nullptr) continue;
      auto status = sink->write(*pending);
      pending->clear();
      if (status && sink->interactive()) status = sink->flush();
      if (!status) {
        if (sink->pipe_closed()) {
          request_stop(SIGPIPE);
          return StageEnd::kPipeClosed;
        }
        return status;
      }
    }
    if (terminal) session_.log.show_status();
    return StageEnd::kCompleted;
  }

  void keep_partial(RecordSink& sink) {
    auto kept = sink.keep_partial();
    if (!kept) {
      session_.log.error(kept.status().message());
    } else if (!kept.value().empty()) {
      session_.log.warn("the run did not complete: the records it finished are in " +
                        cudaagent::quoted(kept.value()) + ", not " + cudaagent::quoted(sink.path()));
    }
  }

  void summarize(double seconds) {
    const StageCounts& c = *counts_;
    char time[32];
    std::snprintf(time, sizeof time, "%.2f", seconds);
    std::string text = std::to_string(c.records) + " records (" + std::to_string(c.stage_errors) +
                       " turned into error records, " + std::to_string(c.bad_lines) +
                       " malformed lines";
    if (c.dropped > 0) text += ", " + std::to_string(c.dropped) + " dropped";
    text += ") in " + std::string(time) + " s";
    if (c.other_shards > 0) {
      text += "; " + std::to_string(c.other_shards) + " records left to the other shards (" +
              options_.shard_note + ")";
    }
    session_.log.info(text);
    const int stop = session_.stop_signal.load();
    if (stop != 0 && stop != SIGPIPE) {
      session_.log.warn("stopped by " + signal_name(stop) + ": " + std::to_string(done_) +
                        " records finished and written, " + std::to_string(c.unfinished) +
                        " cut short or not started (not written; a re-run does them, and takes "
                        "what --db stored)");
    }
  }

  RecordStage& stage_;
  const CommonOptions& options_;
  Session& session_;
  Progress progress_;
  RecordParser parser_;
  StageCounts* counts_ = nullptr;
  std::unique_ptr<RecordSink> out_, errors_;
  std::string out_pending_, err_pending_;
  std::size_t pending_records_ = 0;
  std::vector<std::string> inputs_;
  std::optional<std::uint64_t> total_bytes_;
  std::uint64_t bytes_before_ = 0;
  const LineReader* reader_ = nullptr;  // the input being read, for the progress estimate
  bool inputs_done_ = false;
  std::uint64_t ordinal_ = 0;
  std::uint64_t read_ = 0;  // records of this shard read (well-formed or not)
  std::uint64_t done_ = 0;  // records finished: written, turned into error records or dropped
  std::uint64_t input_records_ = 0, input_bad_ = 0;  // of the current input, to sniff it
  std::string first_bad_reason_;
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

// read_records: the reading half of the driver, for modes that consume records (summaries,
// exports) instead of writing them on. Same input rules: shards, blank lines, the bad-line cap and
// the "not JSON Lines" check.
Status read_records(const CommonOptions& options, Session& session, std::string_view stage,
                    const std::function<Status(const InputRecord&)>& each,
                    std::uint64_t* bad_lines) {
  std::vector<std::string> inputs = options.inputs;
  if (inputs.empty()) inputs.emplace_back("-");
  RecordParser parser;
  std::uint64_t ordinal = 0, bad = 0;
  for (const std::string& input : inputs) {
    auto reader = LineReader::open(input, options.max_record_bytes, &session.stop_signal);
    if (!reader) return reader.status();
    std::uint64_t records = 0, input_bad = 0;
    std::string first_reason;
    InputLine line;
    for (;;) {
      auto more = reader.value().next(line);
      if (!more) return more.status();
      if (!more.value()) break;
      if (!line.oversized && line.bytes.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      if (!options.shard.owns(ordinal++)) continue;
      ++records;
      auto parsed = line.oversized ? Result<simdjson::dom::object>(Status::error("record too long"))
                                   : parser.parse(line.bytes);
      if (!parsed) {
        ++bad;
        ++input_bad;
        if (first_reason.empty()) first_reason = parsed.status().message();
        session.log.warn(std::string(stage) + ": " + cudaagent::quoted(input) + " line " +
                         std::to_string(line.number) + ": " + parsed.status().message());
        if (options.max_bad_lines >= 0 && bad > static_cast<std::uint64_t>(options.max_bad_lines)) {
          return Status::error("more than " + std::to_string(options.max_bad_lines) +
                               " malformed lines (see --max-bad-lines)");
        }
        if (options.max_bad_lines >= 0 && records == kSniffLines && input_bad == kSniffLines) break;
        continue;
      }
      InputRecord record{parsed.value(), line.bytes, input, line.number, {}};
      std::string_view id;
      if (!record.object["id"].get(id)) record.id = id;
      if (Status status = each(record); !status) return status;
    }
    if (session.stop_signal.load() != 0) return Status::ok();
    if (options.max_bad_lines >= 0 && records > 0 && input_bad == records) {
      return Status::error((input == "-" ? std::string("stdin") : cudaagent::quoted(input)) +
                           " is not JSON Lines: its first lines are not JSON objects (line 1: " +
                           first_reason + "; see --max-bad-lines)");
    }
  }
  if (bad_lines != nullptr) *bad_lines = bad;
  return Status::ok();
}

}  // namespace cudaagent
