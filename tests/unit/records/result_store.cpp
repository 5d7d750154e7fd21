// Tests for ResultStore: idempotent, all-or-nothing batches, refusals as Status, and the two
// promises stages rely on, checked against real processes: a key acknowledged by put_batch survives
// SIGKILL, and concurrent writers on overlapping keys all succeed without duplicates.
#include "cudaagent/records/result_store.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cudaagent/base/sha256.h"
#include "cudaagent/records/sqlite.h"
#include "test_support.h"

using cudaagent::ResultStore;
using cudaagent::StoredResult;

namespace {

using cudaagent::testing::TempDir;

using Clock = std::chrono::steady_clock;

ResultStore open_or_fail(const std::string& path,
                         const cudaagent::ResultStoreOptions& options = {}) {
  auto store = ResultStore::open(path, options);
  REQUIRE_MESSAGE(store.is_ok(), store.status().message());
  return std::move(store).value();
}

StoredResult result(const std::string& name, const std::string& stage = "verify") {
  return {cudaagent::sha256_hex(name), stage, "id-" + name, "{\"name\":\"" + name + "\"}"};
}

std::size_t put_or_fail(ResultStore& store, const std::vector<StoredResult>& results) {
  auto put = store.put_batch(results);
  REQUIRE_MESSAGE(put.is_ok(), put.status().message());
  return put.value();
}

std::string job_key(long i) { return cudaagent::sha256_hex("job" + std::to_string(i)); }

// A store_writer process whose stdout (the acknowledged keys) comes back through a pipe.
struct Writer {
  pid_t pid = -1;
  int out = -1;
  std::string partial;  // a line cut short by SIGKILL is never counted
  std::vector<std::string> acked;
  int wait_status = 0;
};

Writer spawn_writer(const std::string& db, long n, long batch, long start = 0) {
  std::vector<std::string> args = {CUDAAGENT_TEST_BIN_DIR "/store_writer", db, std::to_string(n),
                                   std::to_string(batch), std::to_string(start)};
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  int fds[2];
  // CLOEXEC, so that one writer never holds another's pipe open and hides its end of file.
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  Writer writer;
  writer.pid = pid;
  writer.out = fds[0];
  return writer;
}

void take_output(Writer& writer, const char* bytes, std::size_t size) {
  writer.partial.append(bytes, size);
  std::size_t begin = 0;
  for (std::size_t end; (end = writer.partial.find('\n', begin)) != std::string::npos;
       begin = end + 1) {
    writer.acked.push_back(writer.partial.substr(begin, end - begin));
  }
  writer.partial.erase(0, begin);
}

// Reads all writers' output until every pipe is at end of file (true) or the deadline (false).
// Reading as they write keeps a full pipe from slowing the writers down.
bool pump(std::vector<Writer*> writers, Clock::time_point deadline) {
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Writer*> open;
    for (Writer* writer : writers) {
      if (writer->out < 0) continue;
      fds.push_back({writer->out, POLLIN, 0});
      open.push_back(writer);
    }
    if (fds.empty()) return true;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    REQUIRE(ready >= 0);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buffer[65536];
      const ssize_t got = read(fds[i].fd, buffer, sizeof buffer);
      if (got > 0) {
        take_output(*open[i], buffer, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(open[i]->out);
        open[i]->out = -1;
      }
    }
  }
}

void finish(Writer& writer) {
  REQUIRE(pump({&writer}, Clock::now() + std::chrono::seconds(60)));
  REQUIRE(waitpid(writer.pid, &writer.wait_status, 0) == writer.pid);
}

bool exited_ok(const Writer& writer) {
  return WIFEXITED(writer.wait_status) && WEXITSTATUS(writer.wait_status) == 0;
}

std::string one_text(const std::string& path, const std::string& sql) {
  auto db = cudaagent::Database::open(path);
  REQUIRE(db.is_ok());
  auto statement = db.value().prepare(sql);
  REQUIRE_MESSAGE(statement.is_ok(), statement.status().message());
  REQUIRE(statement.value().step().value());
  return statement.value().column_text(0);
}

}  // namespace

TEST_CASE("put_batch stores new results once and find returns their values") {
  TempDir dir;
  ResultStore store = open_or_fail(dir.file("results.db"));
  const std::vector<StoredResult> batch = {result("a"), result("b"), result("c", "profile")};
  CHECK(put_or_fail(store, batch) == 3);
  CHECK(put_or_fail(store, batch) == 0);  // the same keys again: a no-op
  CHECK(put_or_fail(store, {result("a"), result("d")}) == 1);
  CHECK(put_or_fail(store, {}) == 0);

  auto found = store.find(cudaagent::sha256_hex("b"));
  REQUIRE(found.is_ok());
  REQUIRE(found.value().has_value());
  CHECK(*found.value() == "{\"name\":\"b\"}");
  auto missing = store.find(cudaagent::sha256_hex("zzz"));
  REQUIRE(missing.is_ok());
  CHECK_FALSE(missing.value().has_value());

  CHECK(store.count("verify").value() == 3);
  CHECK(store.count("profile").value() == 1);
  CHECK(store.count("reward").value() == 0);
  CHECK(store.quick_check().is_ok());
}

TEST_CASE("the first value stored under a key is the one kept") {
  TempDir dir;
  ResultStore store = open_or_fail(dir.file("results.db"));
  StoredResult first = result("a");
  StoredResult second = first;
  second.value = "{\"other\":true}";
  CHECK(put_or_fail(store, {first, second}) == 1);
  CHECK(*store.find(first.job_key).value() == first.value);
}

TEST_CASE("put_batch is all or nothing: one invalid row stores none of the batch") {
  TempDir dir;
  ResultStore store = open_or_fail(dir.file("results.db"));
  StoredResult broken = result("broken");
  broken.value = "{not json";
  auto put = store.put_batch(std::vector<StoredResult>{result("a"), broken, result("c")});
  REQUIRE_FALSE(put.is_ok());
  CHECK(put.status().message().starts_with("cannot store result '" + broken.job_key + "' in '" +
                                           dir.file("results.db") + "': cannot run 'INSERT"));
  CHECK(put.status().message().find("CHECK constraint failed") != std::string::npos);
  CHECK(store.count("verify").value() == 0);

  StoredResult no_stage = result("x", "");
  CHECK_FALSE(store.put_batch(std::vector<StoredResult>{no_stage}).is_ok());
  CHECK(put_or_fail(store, {result("a")}) == 1);  // the store is usable after a failed batch
}

TEST_CASE("record_id is optional and stored as NULL when empty") {
  TempDir dir;
  const std::string path = dir.file("results.db");
  {
    ResultStore store = open_or_fail(path);
    StoredResult anonymous = result("a");
    anonymous.record_id.clear();
    CHECK(put_or_fail(store, {anonymous, result("b")}) == 2);
  }
  CHECK(one_text(path, "SELECT count(*) FROM results WHERE record_id IS NULL") == "1");
  CHECK(one_text(path, "SELECT record_id FROM results WHERE record_id IS NOT NULL") == "id-b");
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(std::abs(std::stod(one_text(path, "SELECT max(created_at) FROM results")) - now) < 60.0);
}

TEST_CASE("a read-only store reads but refuses writes") {
  TempDir dir;
  const std::string path = dir.file("results.db");
  {
    ResultStore store = open_or_fail(path);
    CHECK(put_or_fail(store, {result("a")}) == 1);
  }
  cudaagent::ResultStoreOptions read_only;
  read_only.read_only = true;
  ResultStore store = open_or_fail(path, read_only);
  CHECK(store.find(cudaagent::sha256_hex("a")).value().has_value());
  auto put = store.put_batch(std::vector<StoredResult>{result("b")});
  REQUIRE_FALSE(put.is_ok());
  CHECK(put.status().message().find("attempt to write a readonly database") != std::string::npos);
  CHECK(store.quick_check().is_ok());
}

TEST_CASE("ResultStore::open refuses what it cannot use") {
  TempDir dir;
  auto directory = ResultStore::open(dir.file(""));
  REQUIRE_FALSE(directory.is_ok());
  CHECK(directory.status().message().starts_with("cannot open '" + dir.file("") + "'"));

  const std::string future = dir.file("future.db");
  {
    auto db = cudaagent::Database::open(future);
    REQUIRE(db.is_ok());
    REQUIRE(db.value().exec("PRAGMA user_version = 99").is_ok());
  }
  auto newer = ResultStore::open(future);
  REQUIRE_FALSE(newer.is_ok());
  CHECK(newer.status().message().find("schema version 99 is newer") != std::string::npos);

  const std::string empty = dir.file("empty.db");
  { REQUIRE(cudaagent::Database::open(empty).is_ok()); }
  cudaagent::ResultStoreOptions read_only;
  read_only.read_only = true;
  auto unmigrated = ResultStore::open(empty, read_only);
  REQUIRE_FALSE(unmigrated.is_ok());
  CHECK(unmigrated.status().message() == "cannot open '" + empty +
                                             "' read-only: its schema version is 0, this program "
                                             "needs 1");
}

TEST_CASE("acknowledged results survive SIGKILL of the writer at random points") {
  TempDir dir;
  const std::string path = dir.file("crash.db");
  constexpr long kResults = 3000;
  constexpr long kBatch = 50;
  const unsigned seed = std::random_device{}();
  CAPTURE(seed);
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> delay_ms(5, 80);

  std::set<std::string> acked;
  int killed_mid_run = 0;
  for (int run = 0; run < 5; ++run) {
    Writer writer = spawn_writer(path, kResults, kBatch);
    // Even runs count the delay from the start (kills during open and migration too); odd runs
    // from the first acknowledgement, so that slow starts (sanitizers) still die mid-stream.
    if (run % 2 == 1) {
      while (writer.acked.empty() &&
             !pump({&writer}, Clock::now() + std::chrono::milliseconds(2))) {
      }
    }
    const auto delay = std::chrono::milliseconds(delay_ms(random));
    if (!pump({&writer}, Clock::now() + delay)) kill(writer.pid, SIGKILL);
    finish(writer);
    if (WIFSIGNALED(writer.wait_status)) {
      CHECK(WTERMSIG(writer.wait_status) == SIGKILL);
      ++killed_mid_run;
    } else {
      CHECK(exited_ok(writer));
    }
    acked.insert(writer.acked.begin(), writer.acked.end());
    // Every key acknowledged so far must be in the store the moment the writer is gone.
    ResultStore store = open_or_fail(path);
    for (const std::string& key : acked) {
      auto found = store.find(key);
      REQUIRE(found.is_ok());
      CHECK_MESSAGE(found.value().has_value(), "lost acknowledged key ", key, " after run ", run);
    }
    CHECK(store.quick_check().is_ok());
  }
  // The random runs above may all finish before their kill on a fast machine (later runs find
  // their keys stored and have little to do), so one more writer is always killed mid-stream: a
  // writer of 4,000 batches into a store of its own, killed at its first acknowledgement.
  {
    const std::string long_path = dir.file("crash-long.db");
    Writer writer = spawn_writer(long_path, 200000, kBatch);
    while (writer.acked.empty() && !pump({&writer}, Clock::now() + std::chrono::milliseconds(2))) {
    }
    kill(writer.pid, SIGKILL);
    finish(writer);
    if (WIFSIGNALED(writer.wait_status)) ++killed_mid_run;
    ResultStore store = open_or_fail(long_path);
    for (const std::string& key : writer.acked) {
      CHECK_MESSAGE(store.find(key).value().has_value(), "lost acknowledged key ", key, " of the last kill");
    }
  }
  MESSAGE(killed_mid_run, " of 6 writers killed mid-run, ", acked.size(), " keys acknowledged");
  CHECK(killed_mid_run > 0);

  Writer last = spawn_writer(path, kResults, kBatch);
  finish(last);
  REQUIRE(exited_ok(last));
  CHECK(last.acked.size() == static_cast<std::size_t>(kResults));

  ResultStore store = open_or_fail(path);
  CHECK(store.count("store_writer").value() == static_cast<std::size_t>(kResults));
  CHECK(one_text(path, "SELECT count(*) - count(DISTINCT job_key) FROM results") == "0");
  for (long i = 0; i < kResults; ++i) {
    if (!store.find(job_key(i)).value().has_value()) FAIL_CHECK("missing job ", i);
  }
  CHECK(store.quick_check().is_ok());
}

TEST_CASE("concurrent writers on overlapping keys all succeed and store the union once") {
  TempDir dir;
  const std::string path = dir.file("shared.db");  // created by the racing writers themselves
  constexpr long kBatch = 50;
  struct Range {
    long start;
    long end;
  };
  const std::vector<Range> ranges = {{0, 2000}, {500, 2500}, {1000, 3000}, {0, 3000}};
  std::vector<Writer> writers;
  for (const Range& range : ranges) {
    writers.push_back(spawn_writer(path, range.end, kBatch, range.start));
  }
  std::vector<Writer*> all;
  for (Writer& writer : writers) all.push_back(&writer);
  REQUIRE(pump(all, Clock::now() + std::chrono::seconds(60)));
  for (std::size_t w = 0; w < writers.size(); ++w) {
    finish(writers[w]);
    CAPTURE(w);
    CHECK(exited_ok(writers[w]));
    CHECK(writers[w].acked.size() == static_cast<std::size_t>(ranges[w].end - ranges[w].start));
  }

  ResultStore store = open_or_fail(path);
  CHECK(store.count("store_writer").value() == 3000);
  CHECK(one_text(path, "SELECT count(*) - count(DISTINCT job_key) FROM results") == "0");
  for (long i = 0; i < 3000; ++i) {
    if (!store.find(job_key(i)).value().has_value()) FAIL_CHECK("missing job ", i);
  }
  CHECK(store.quick_check().is_ok());
}

TEST_CASE("merge_from copies a shard's results, keeps what is there, and merging twice adds nothing") {
  TempDir dir;
  {
    ResultStore shard = open_or_fail(dir.file("shard-0.db"));
    REQUIRE(shard.put_batch(std::vector<StoredResult>{{"k1", "verify", "a", "{\"v\":1}"},
                                                      {"k2", "verify", "b", "{\"v\":2}"},
                                                      {"k3", "reward", "a", "{\"r\":3}"}}));
  }
  ResultStore merged = open_or_fail(dir.file("all.db"));
  REQUIRE(merged.put_batch(std::vector<StoredResult>{{"k1", "verify", "a", "{\"v\":\"kept\"}"}}));
  auto counts = merged.merge_from(dir.file("shard-0.db"));
  REQUIRE_MESSAGE(counts, counts.status().message());
  REQUIRE(counts.value().size() == 2);
  CHECK(counts.value()[0].stage == "reward");
  CHECK(counts.value()[0].held == 1);
  CHECK(counts.value()[0].added == 1);
  CHECK(counts.value()[1].stage == "verify");
  CHECK(counts.value()[1].held == 2);
  CHECK(counts.value()[1].added == 1);  // k1 was there already
  CHECK(merged.find("k1").value() == std::optional<std::string>("{\"v\":\"kept\"}"));
  CHECK(merged.find("k3").value() == std::optional<std::string>("{\"r\":3}"));
  auto again = merged.merge_from(dir.file("shard-0.db"));
  REQUIRE(again);
  for (const auto& count : again.value()) CHECK(count.added == 0);
  CHECK(merged.count("verify").value() == 2);
  // A store that is missing or not a store changes nothing and says why.
  CHECK_FALSE(merged.merge_from(dir.file("missing.db")));
  cudaagent::testing::write_file(dir.file("junk.db"), "not a database, not at all, no");
  CHECK_FALSE(merged.merge_from(dir.file("junk.db")));
  CHECK(merged.count("verify").value() == 2);
  // The merged store still takes writes (nothing stayed attached).
  CHECK(merged.put_batch(std::vector<StoredResult>{{"k9", "verify", "", "{}"}}));
}
