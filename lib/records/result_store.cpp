// The results table behind ResultStore. Inserts use ON CONFLICT (job_key) DO NOTHING rather than
// INSERT OR IGNORE: only a repeated key is skipped, while a broken row (invalid JSON, empty stage)
// still fails the batch instead of vanishing silently.
#include "cudaagent/records/result_store.h"

#include <array>

#include "cudaagent/base/session.h"

namespace cudaagent {
namespace {

// Append only: a released build's migrations never change, new ones take the next version.
constexpr std::array<Migration, 1> kMigrations{{
    {1, R"sql(
      CREATE TABLE results (
        job_key    TEXT NOT NULL PRIMARY KEY CHECK (length(job_key) > 0),
        stage      TEXT NOT NULL CHECK (length(stage) > 0),
        record_id  TEXT,
        value      TEXT NOT NULL CHECK (json_valid(value)),
        created_at REAL NOT NULL  -- unix time in seconds when first stored
      ) WITHOUT ROWID;
      CREATE INDEX results_by_stage ON results (stage);
    )sql"},
}};

constexpr std::string_view kFindSql = "SELECT value FROM results WHERE job_key = ?1";
// created_at comes from sqlite's clock so that every writer stamps rows the same way.
constexpr std::string_view kInsertSql = R"sql(
  INSERT INTO results (job_key, stage, record_id, value, created_at)
  VALUES (?1, ?2, ?3, ?4, (julianday('now') - 2440587.5) * 86400.0)
  ON CONFLICT (job_key) DO NOTHING
)sql";
constexpr std::string_view kCountSql = "SELECT count(*) FROM results WHERE stage = ?1";
constexpr int kQuickCheckFindings = 5;

// An unfinished SELECT holds a read snapshot (and blocks checkpoints) until reset.
class ResetOnExit {
 public:
  explicit ResetOnExit(Statement& statement) : statement_(statement) {}
  ResetOnExit(const ResetOnExit&) = delete;
  ResetOnExit& operator=(const ResetOnExit&) = delete;
  ~ResetOnExit() { statement_.reset(); }

 private:
  Statement& statement_;
};

}  // namespace

Result<ResultStore> ResultStore::open(const std::string& path, const ResultStoreOptions& options) {
  DatabaseOptions db_options;
  db_options.read_only = options.read_only;
  db_options.busy_timeout_ms = options.busy_timeout_ms;
  db_options.synchronous = Synchronous::kFull;  // put_batch promises durability
  auto db = Database::open(path, db_options);
  if (!db) return db.status();

  if (options.read_only) {
    // A read-only connection cannot migrate; say so instead of failing on BEGIN IMMEDIATE.
    auto version = schema_version(db.value());
    if (!version) return version.status();
    const int expected = kMigrations.back().version;
    if (version.value() != expected) {
      return Status::error("cannot open " + cudaagent::quoted(path) + " read-only: its schema version is " +
                           std::to_string(version.value()) + ", this program needs " +
                           std::to_string(expected));
    }
  } else if (Status status = migrate(db.value(), kMigrations); !status) {
    return status;
  }

  auto find = db.value().prepare(kFindSql);
  if (!find) return find.status();
  auto insert = db.value().prepare(kInsertSql);
  if (!insert) return insert.status();
  auto count = db.value().prepare(kCountSql);
  if (!count) return count.status();
  return ResultStore(std::move(db).value(), std::move(find).value(), std::move(insert).value(),
                     std::move(count).value());
}

Result<std::optional<std::string>> ResultStore::find(std::string_view job_key) {
  ResetOnExit reset(find_);
  auto row = find_.bind_text(1, job_key).step();
  if (!row) return row.status();
  if (!row.value()) return std::optional<std::string>();
  return std::optional<std::string>(find_.column_text(0));
}

Result<std::size_t> ResultStore::put_batch(std::span<const StoredResult> results) {
  if (results.empty()) return std::size_t{0};
  auto transaction = Transaction::begin(db_);
  if (!transaction) return transaction.status();
  std::size_t inserted = 0;
  for (const StoredResult& result : results) {
    ResetOnExit reset(insert_);
    insert_.bind_text(1, result.job_key).bind_text(2, result.stage).bind_text(4, result.value);
    if (result.record_id.empty()) {
      insert_.bind_null(3);
    } else {
      insert_.bind_text(3, result.record_id);
    }
    auto done = insert_.step();
    if (!done) {
      // The Transaction's destructor rolls the whole batch back.
      return done.status().with_context("cannot store result " + cudaagent::quoted(result.job_key) + " in " +
                                        cudaagent::quoted(path()));
    }
    inserted += static_cast<std::size_t>(db_.changes());
  }
  if (Status status = transaction.value().commit(); !status) return status;
  return inserted;
}

Result<std::size_t> ResultStore::count(std::string_view stage) {
  ResetOnExit reset(count_);
  auto row = count_.bind_text(1, stage).step();
  if (!row) return row.status();
  return static_cast<std::size_t>(row.value() ? count_.column_int64(0) : 0);
}

Result<std::vector<ResultStore::MergeCount>> ResultStore::merge_from(const std::string& path) {
  // Opened first on its own, read-only: a missing file or a store of another schema version is
  // refused before anything is attached.
  {
    auto other = ResultStore::open(path, ResultStoreOptions{.read_only = true});
    if (!other) return other.status();
  }
  auto attach = db_.prepare("ATTACH DATABASE ?1 AS shard");
  if (!attach) return attach.status();
  if (auto done = attach.value().bind_text(1, path).step(); !done) return done.status();
  struct Detach {
    Database& db;
    ~Detach() { (void)db.exec("DETACH DATABASE shard"); }
  } detach{db_};
  std::vector<MergeCount> counts;
  {
    auto held = db_.prepare("SELECT stage, count(*) FROM shard.results GROUP BY stage ORDER BY stage");
    if (!held) return held.status();
    for (;;) {
      auto row = held.value().step();
      if (!row) return row.status();
      if (!row.value()) break;
      counts.push_back({held.value().column_text(0),
                        static_cast<std::size_t>(held.value().column_int64(1)), 0});
    }
  }
  auto transaction = Transaction::begin(db_);
  if (!transaction) return transaction.status();
  auto insert = db_.prepare(R"sql(
    INSERT INTO main.results (job_key, stage, record_id, value, created_at)
    SELECT job_key, stage, record_id, value, created_at FROM shard.results WHERE stage = ?1
    ON CONFLICT (job_key) DO NOTHING
  )sql");
  if (!insert) return insert.status();
  for (MergeCount& count : counts) {
    insert.value().reset();
    if (auto done = insert.value().bind_text(1, count.stage).step(); !done) {
      return done.status().with_context("cannot merge " + cudaagent::quoted(path));
    }
    count.added = static_cast<std::size_t>(db_.changes());
  }
  insert.value().reset();
  if (Status status = transaction.value().commit(); !status) return status;
  return counts;
}

Status ResultStore::quick_check() {
  auto check = db_.prepare("PRAGMA quick_check(" + std::to_string(kQuickCheckFindings) + ")");
  if (!check) return check.status();
  std::string findings;
  for (;;) {
    auto row = check.value().step();
    if (!row) return row.status();
    if (!row.value()) break;
    if (!findings.empty()) findings.append("; ");
    findings.append(check.value().column_text(0));
  }
  if (findings == "ok") return Status::ok();
  return Status::error("cannot trust " + cudaagent::quoted(path()) + ": quick_check found " + findings);
}

}  // namespace cudaagent
