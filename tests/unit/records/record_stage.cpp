// The record driver's --jobs mode: works finish in any order, records come out in input order,
// malformed lines keep their place, dropped records vanish, and a stop signal drops the works that
// had not started while keeping every finished record.
#include "cudaagent/records/record_stage.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "test_support.h"

using cudaagent::InputRecord;
using cudaagent::RecordEdit;
using cudaagent::testing::TempDir;

namespace {

// Record {"id":"rN","ms":M,"do":"key"|"error"|"drop"|"pass"}: the work sleeps M ms, then acts.
class SlowStage final : public cudaagent::RecordStage {
 public:
  // With `stop`, the driver's thread raises SIGTERM in it while preparing record `stop_at`.
  explicit SlowStage(std::atomic<int>* stop = nullptr, int stop_at = -1)
      : stop_(stop), stop_at_(stop_at) {}
  std::string_view key() const override { return "slow"; }
  RecordEdit process(const InputRecord&) override {
    ++processed;
    return RecordEdit::pass_through();
  }
  Work prepare(const InputRecord& record) override {
    std::int64_t ms = 0;
    std::string_view action;
    if (record.object["ms"].get(ms) || record.object["do"].get(action)) {
      return [] { return RecordEdit::error("test record without ms or do"); };
    }
    if (action == "process") return {};
    if (stop_ != nullptr && prepared++ == stop_at_) stop_->store(SIGTERM);
    return [this, ms, action = std::string(action), id = std::string(record.id)] {
      ++started;
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      {
        std::lock_guard lock(mutex);
        finished.insert(id);
      }
      if (action == "error") return RecordEdit::error("asked to fail");
      if (action == "drop") return RecordEdit::drop();
      if (action == "pass") return RecordEdit::pass_through();
      return RecordEdit::set_key("\"" + id + "\"");
    };
  }
  cudaagent::Status before_release() override {
    ++releases;
    return cudaagent::Status::ok();
  }

  int prepared = 0;
  std::atomic<int> started{0};
  std::atomic<int> processed{0};
  int releases = 0;
  std::mutex mutex;
  std::set<std::string> finished;

 private:
  std::atomic<int>* stop_;
  int stop_at_;
};

struct Run {
  std::string out;
  cudaagent::StageCounts counts;
  bool completed = false;
  bool stopped = false;
};

Run run_stage(cudaagent::RecordStage& stage, const std::string& input, int jobs,
              std::atomic<int>& stop) {
  TempDir dir;
  cudaagent::testing::write_file(dir.file("in.jsonl"), input);
  cudaagent::CommonOptions options;
  options.inputs = {dir.file("in.jsonl")};
  options.output = dir.file("out.jsonl");
  options.jobs = jobs;
  options.quiet = true;
  cudaagent::Logger log("test", stderr, true);
  cudaagent::Clock clock;
  cudaagent::Session session{log, clock, stop};
  Run run;
  auto end = cudaagent::run_record_stage(stage, options, session, &run.counts);
  REQUIRE(end.is_ok());
  run.completed = end.value() == cudaagent::StageEnd::kCompleted;
  // A stopped run keeps what it finished under out.jsonl.partial, never under out.jsonl.
  run.stopped = stop.load() != 0;
  CHECK(std::filesystem::exists(dir.file("out.jsonl")) == !run.stopped);
  run.out = cudaagent::testing::read_file(dir.file(run.stopped ? "out.jsonl.partial" : "out.jsonl"));
  return run;
}

std::string record(int i, int ms, const char* action = "key") {
  return "{\"id\":\"r" + std::to_string(i) + "\",\"ms\":" + std::to_string(ms) + ",\"do\":\"" +
         action + "\"}\n";
}

}  // namespace

TEST_CASE("--jobs: works finish out of order, records come out in input order") {
  std::string input, expected;
  for (int i = 0; i < 24; ++i) {
    // Early records sleep longest, so with 4 threads later ones finish first.
    const int ms = (24 - i) * 3;
    const char* action = i % 7 == 3 ? "error" : i % 5 == 4 ? "drop" : i % 11 == 5 ? "pass" : "key";
    input += record(i, ms, action);
    if (i == 10) input += "{not json\n";
    const std::string id = "r" + std::to_string(i);
    const std::string raw = record(i, ms, action).substr(0, record(i, ms, action).size() - 1);
    if (std::string(action) == "key") {
      expected += raw.substr(0, raw.size() - 1) + ",\"slow\":\"" + id + "\"}\n";
    } else if (std::string(action) == "pass") {
      expected += raw + "\n";
    } else if (std::string(action) == "error") {
      expected += "error:" + id + "\n";
    }
    if (i == 10) expected += "error:bad\n";
  }
  // Error records carry source paths that differ per run: reduce them to a marker.
  const auto normalise = [](const std::string& out) {
    std::istringstream lines(out);
    std::string line, result;
    while (std::getline(lines, line)) {
      if (line.rfind("{\"error\":", 0) == 0) {
        const auto at = line.find("\"id\":\"");
        result += at == std::string::npos
                      ? "error:bad\n"
                      : "error:" + line.substr(at + 6, line.find('"', at + 6) - at - 6) + "\n";
      } else {
        result += line + "\n";
      }
    }
    return result;
  };
  std::atomic<int> stop{0};
  for (int jobs : {1, 4}) {
    CAPTURE(jobs);
    SlowStage stage;
    const Run run = run_stage(stage, input, jobs, stop);
    CHECK(run.completed);
    CHECK(normalise(run.out) == expected);
    CHECK(stage.started.load() == 24);
    CHECK(stage.processed.load() == 0);
    CHECK(run.counts.records == 24);
    CHECK(run.counts.bad_lines == 1);
    CHECK(run.counts.dropped == 4);  // i = 4, 9, 14, 19
    CHECK(run.counts.stage_errors == 3);  // i = 3, 10, 17
  }
}

TEST_CASE("--jobs: a record without a work is handled by process() in its turn") {
  std::string input = record(0, 60) + record(1, 0, "process") + record(2, 0);
  std::atomic<int> stop{0};
  SlowStage stage;
  const Run run = run_stage(stage, input, 3, stop);
  CHECK(stage.processed.load() == 1);
  CHECK(run.out == "{\"id\":\"r0\",\"ms\":60,\"do\":\"key\",\"slow\":\"r0\"}\n" +
                       record(1, 0, "process") +
                       "{\"id\":\"r2\",\"ms\":0,\"do\":\"key\",\"slow\":\"r2\"}\n");
}

TEST_CASE("--jobs: a stop signal drops works not started and keeps finished records") {
  std::string input;
  for (int i = 0; i < 200; ++i) input += record(i, 300);
  std::atomic<int> stop{0};
  SlowStage stage(&stop, 5);
  const Run run = run_stage(stage, input, 2, stop);
  // Six records were handed over and two threads were busy for 300 ms when the signal came: at
  // least four queued works are dropped, not run (fewer start when a thread was slow to wake).
  CHECK(stage.prepared == 6);
  CHECK(stage.started.load() <= 2);
  std::istringstream lines(run.out);
  std::string line;
  std::set<std::string> written;
  int previous = -1;
  while (std::getline(lines, line)) {
    const auto at = line.find("\"id\":\"r") + 7;
    const int index = std::stoi(line.substr(at));
    CHECK(index > previous);  // in order, possibly with gaps
    previous = index;
    written.insert("r" + std::to_string(index));
  }
  // Every work that finished is written; nothing that did not run is.
  std::lock_guard lock(stage.mutex);
  CHECK(written == stage.finished);
  CHECK(written.size() == static_cast<std::size_t>(stage.started.load()));
  for (const auto& id : written) CHECK((id == "r0" || id == "r1"));
}

namespace {

// Records {"id", "wait": true|false}: a work that waits returns only once the test releases it
// (or a stop comes, or a minute passes, which the test then reports); the others return at once.
class GateStage final : public cudaagent::RecordStage {
 public:
  explicit GateStage(const std::atomic<int>& stop) : stop_(stop) {}
  std::string_view key() const override { return "gate"; }
  bool slow_records() const override { return true; }
  RecordEdit process(const InputRecord&) override { return RecordEdit::pass_through(); }
  Work prepare(const InputRecord& record) override {
    bool wait = false;
    if (record.object["wait"].get(wait)) wait = false;
    return [this, wait] {
      if (!wait) return RecordEdit::set_key("true");
      waiting = true;
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!released.load() && stop_.load() == 0 && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (stop_.load() != 0) return RecordEdit::interrupted();
      released_in_time = released.load();
      return RecordEdit::set_key("\"waited\"");
    };
  }
  std::atomic<bool> released{false};
  std::atomic<bool> waiting{false};
  std::atomic<bool> released_in_time{false};

 private:
  const std::atomic<int>& stop_;
};

// One line from `fd`, waiting at most a minute for it.
std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (true) {
    pollfd watch{fd, POLLIN, 0};
    if (::poll(&watch, 1, 60'000) <= 0 || ::read(fd, &c, 1) != 1 || c == '\n') return line;
    line.push_back(c);
  }
}

struct PipeRun {
  TempDir dir;
  cudaagent::CommonOptions options;
  std::atomic<int> stop{0};
  cudaagent::Logger log{"test", stderr, true};
  cudaagent::Clock clock;
  cudaagent::StageCounts counts;
  PipeRun(const std::string& input, int jobs) {
    cudaagent::testing::write_file(dir.file("in.jsonl"), input);
    REQUIRE(::mkfifo(dir.file("out").c_str(), 0600) == 0);
    options.inputs = {dir.file("in.jsonl")};
    options.output = dir.file("out");
    options.jobs = jobs;
    options.quiet = true;
  }
};

}  // namespace

TEST_CASE("records stream: the first is written while a later work still runs (issue 16)") {
  for (int jobs : {1, 2}) {
    CAPTURE(jobs);
    PipeRun run("{\"id\":\"r0\"}\n{\"id\":\"r1\",\"wait\":true}\n", jobs);
    GateStage stage(run.stop);
    cudaagent::Result<cudaagent::StageEnd> end = cudaagent::Status::error("not run");
    std::thread driver([&] {
      cudaagent::Session session{run.log, run.clock, run.stop};
      end = cudaagent::run_record_stage(stage, run.options, session, &run.counts);
    });
    const int fd = ::open(run.dir.file("out").c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    // r1 waits for the test, which waits for r0: only a driver that writes r0 at once passes
    // (with one job, before r1's work starts in its own thread; with two, while it runs).
    CHECK(read_line(fd) == "{\"id\":\"r0\",\"gate\":true}");
    stage.released = true;
    CHECK(read_line(fd) == "{\"id\":\"r1\",\"wait\":true,\"gate\":\"waited\"}");
    driver.join();
    ::close(fd);
    REQUIRE(end.is_ok());
    CHECK(end.value() == cudaagent::StageEnd::kCompleted);
    CHECK(stage.released_in_time.load());
  }
}

TEST_CASE("a reader downstream that goes away stops the run, and the running work with it") {
  PipeRun run("{\"id\":\"r0\"}\n{\"id\":\"r1\",\"wait\":true}\n{\"id\":\"r2\"}\n", 2);
  GateStage stage(run.stop);
  cudaagent::Result<cudaagent::StageEnd> end = cudaagent::Status::error("not run");
  std::thread driver([&] {
    cudaagent::Session session{run.log, run.clock, run.stop};
    end = cudaagent::run_record_stage(stage, run.options, session, &run.counts);
  });
  const int fd = ::open(run.dir.file("out").c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  CHECK(read_line(fd) == "{\"id\":\"r0\",\"gate\":true}");
  // As the tools do (run_tool): a write to the closed pipe would be EPIPE, not a signal.
  struct sigaction ignore {}, saved {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &saved);
  ::close(fd);  // `| head -1`: nothing more will be read, and nothing is released to the work
  driver.join();
  ::sigaction(SIGPIPE, &saved, nullptr);
  REQUIRE(end.is_ok());
  CHECK(end.value() == cudaagent::StageEnd::kPipeClosed);
  CHECK(run.stop.load() == SIGPIPE);  // what ended r1's wait
  CHECK_FALSE(stage.released_in_time.load());
}

TEST_CASE("a record whose work a stop cut short is not written, and is counted unfinished") {
  TempDir dir;
  cudaagent::testing::write_file(dir.file("in.jsonl"), "{\"id\":\"r0\"}\n{\"id\":\"r1\",\"wait\":true}\n");
  std::atomic<int> stop{0};
  GateStage stage(stop);
  cudaagent::CommonOptions options;
  options.inputs = {dir.file("in.jsonl")};
  options.output = dir.file("out.jsonl");
  options.quiet = true;
  cudaagent::Logger log("test", stderr, true);
  cudaagent::Clock clock;
  cudaagent::Session session{log, clock, stop};
  cudaagent::StageCounts counts;
  cudaagent::Result<cudaagent::StageEnd> end = cudaagent::Status::error("not run");
  {
    std::thread stopper([&] {
      // The stop comes while r1's work waits; r0 was final before it began.
      while (!stage.waiting.load()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      stop.store(SIGTERM);
    });
    end = cudaagent::run_record_stage(stage, options, session, &counts);
    stopper.join();
  }
  REQUIRE(end.is_ok());
  CHECK(counts.unfinished == 1);
  CHECK(cudaagent::testing::read_file(dir.file("out.jsonl.partial")) == "{\"id\":\"r0\",\"gate\":true}\n");
  CHECK_FALSE(std::filesystem::exists(dir.file("out.jsonl")));
}

TEST_CASE("an input that is not JSON Lines fails at once; a few bad lines do not (issue 16)") {
  const auto run_on = [](const std::string& input, std::int64_t max_bad_lines,
                         cudaagent::StageCounts& counts) {
    TempDir dir;
    cudaagent::testing::write_file(dir.file("in.txt"), input);
    cudaagent::CommonOptions options;
    options.inputs = {dir.file("in.txt")};
    options.output = dir.file("out.jsonl");
    options.quiet = true;
    options.max_bad_lines = max_bad_lines;
    cudaagent::Logger log("test", stderr, true);
    cudaagent::Clock clock;
    std::atomic<int> stop{0};
    cudaagent::Session session{log, clock, stop};
    SlowStage stage;
    return cudaagent::run_record_stage(stage, options, session, &counts);
  };
  std::string lines;
  for (int i = 0; i < 20; ++i) lines += "line " + std::to_string(i) + " of a text file\n";
  cudaagent::StageCounts counts;
  auto text = run_on(lines, 1000, counts);
  REQUIRE_FALSE(text.is_ok());
  CHECK(text.status().message().find("is not JSON Lines: none of its first 8 lines is a JSON object") !=
        std::string::npos);
  CHECK(counts.bad_lines == 8);  // it stopped reading there
  counts = {};
  auto short_text = run_on("hello\nworld\n", 1000, counts);
  REQUIRE_FALSE(short_text.is_ok());
  CHECK(short_text.status().message().find("none of its 2 lines is a JSON object") != std::string::npos);
  counts = {};
  auto header = run_on("id,ms\n" + record(0, 0) + record(1, 0), 1000, counts);
  REQUIRE(header.is_ok());  // one bad line among records is an error record, as always
  CHECK(counts.bad_lines == 1);
  CHECK(counts.records == 2);
  counts = {};
  auto unlimited = run_on(lines, -1, counts);
  REQUIRE(unlimited.is_ok());
  CHECK(counts.bad_lines == 20);
}

TEST_CASE("records of other shards are counted, so a summary can say they were left out") {
  TempDir dir;
  std::string input;
  for (int i = 0; i < 9; ++i) input += record(i, 0, "process");
  cudaagent::testing::write_file(dir.file("in.jsonl"), input);
  cudaagent::CommonOptions options;
  options.inputs = {dir.file("in.jsonl")};
  options.output = dir.file("out.jsonl");
  options.quiet = true;
  options.shard = {1, 3};
  cudaagent::Logger log("test", stderr, true);
  cudaagent::Clock clock;
  std::atomic<int> stop{0};
  cudaagent::Session session{log, clock, stop};
  SlowStage stage;
  cudaagent::StageCounts counts;
  REQUIRE(cudaagent::run_record_stage(stage, options, session, &counts).is_ok());
  CHECK(counts.records == 3);
  CHECK(counts.other_shards == 6);
}
