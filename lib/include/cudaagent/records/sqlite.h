// RAII over the sqlite3 C API: Database, Statement, Transaction and schema
// migrations. Every failing sqlite call comes back as a Status that names the operation, sqlite's
// reason and the caller's file:line (CallSite), so users need no <sqlite3.h>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "cudaagent/base/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace cudaagent {

// Where a call was made, for messages: a default argument `CallSite where = CallSite::here()`
// records the caller's file and line. std::source_location would do for g++, but clang before 15
// (Debian's clang-tidy 14 included) cannot parse libstdc++'s; these builtins work in both.
struct CallSite {
  static constexpr CallSite here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return CallSite{file, line};
  }
  const char* file;
  int line;
};

enum class Synchronous {
  kFull,    // each commit is synced: durable across power loss once commit() returns
  kNormal,  // WAL synced at checkpoints only: survives a killed process, may lose the last
            // commits on power loss
};

struct DatabaseOptions {
  bool read_only = false;
  bool create = true;  // create the file when missing (ignored when read_only)
  // How long a call waits on another writer before failing with "database is locked".
  int busy_timeout_ms = 10000;
  Synchronous synchronous = Synchronous::kFull;
  bool wal = true;  // journal_mode=WAL: readers never block the one writer (not for read_only)
};

class Statement;

// One connection. Move-only; a moved-from Database may only be destroyed or assigned to.
// Not thread-safe: use one Database per thread (each opens its own connection); several
// processes may share the file (WAL + BEGIN IMMEDIATE + busy_timeout serialise the writers).
class Database {
 public:
  // Opens (or creates) the database at `path` and applies the options. Fails with
  // "cannot open 'path': <reason> (at file:line)".
  static Result<Database> open(const std::string& path, const DatabaseOptions& options = {},
                               CallSite where = CallSite::here());

  Database(Database&&) noexcept = default;
  Database& operator=(Database&&) noexcept = default;
  ~Database() = default;

  // Runs one or more statements that return no rows we keep (DDL, PRAGMA x = y, BEGIN).
  Status exec(std::string_view sql, CallSite where = CallSite::here());
  // Compiles exactly one statement; trailing text other than whitespace or ';' is an error.
  Result<Statement> prepare(std::string_view sql, CallSite where = CallSite::here());

  // Rows changed by the last INSERT/UPDATE/DELETE on this connection.
  std::int64_t changes() const;
  std::int64_t last_insert_rowid() const;
  // True between BEGIN and COMMIT/ROLLBACK (including one sqlite rolled back by itself: false).
  bool in_transaction() const;
  const std::string& path() const { return path_; }

 private:
  friend class Transaction;
  struct Closer {
    void operator()(sqlite3* db) const;
  };
  Database(std::unique_ptr<sqlite3, Closer> db, std::string path);

  std::unique_ptr<sqlite3, Closer> db_;
  std::string path_;
};

// A compiled statement. Move-only. It may outlive its Database (the connection is closed when the
// last statement is finalized), but using it after the Database is gone is an error.
// Binds chain and record the first failure, which step() then returns, so that binding a row reads
// as one expression: `stmt.bind_text(1, key).bind_int64(2, n); auto row = stmt.step();`.
class Statement {
 public:
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;
  ~Statement() = default;

  // Parameters are numbered from 1, as in sqlite. Text and blobs are copied.
  Statement& bind_text(int index, std::string_view text, CallSite where = CallSite::here());
  Statement& bind_int64(int index, std::int64_t value, CallSite where = CallSite::here());
  Statement& bind_double(int index, double value, CallSite where = CallSite::here());
  Statement& bind_null(int index, CallSite where = CallSite::here());
  Statement& bind_blob(int index, std::span<const std::byte> bytes,
                       CallSite where = CallSite::here());

  // true: a row is available through column_*; false: the statement has finished. An error
  // (including a failed bind since the last reset) ends the statement until reset().
  Result<bool> step(CallSite where = CallSite::here());
  // Makes the statement runnable again and clears bindings and any recorded bind failure.
  // Reset a SELECT after use: an unfinished one keeps a read snapshot open and blocks checkpoints.
  void reset();

  // Columns are numbered from 0. Values are copied out, so they outlive the row. A NULL reads as
  // "", 0 or 0.0; ask column_is_null to tell them apart.
  std::string column_text(int index) const;
  std::int64_t column_int64(int index) const;
  double column_double(int index) const;
  bool column_is_null(int index) const;
  int column_count() const;

 private:
  friend class Database;
  struct Finalizer {
    void operator()(sqlite3_stmt* stmt) const;
  };
  explicit Statement(sqlite3_stmt* stmt);
  void note_bind(int rc, std::string_view what, int index, CallSite where);

  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
  Status bind_error_ = Status::ok();
};

// BEGIN IMMEDIATE ... COMMIT. Taking the write lock at BEGIN (not at the first write) means a busy
// database makes begin() wait (busy_timeout) instead of failing mid-transaction with a deadlock.
// Move-only; its Database must neither move nor die first. The destructor rolls back unless
// committed; never throws.
class Transaction {
 public:
  static Result<Transaction> begin(Database& db, CallSite where = CallSite::here());
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&& other) noexcept;
  ~Transaction();

  // Ok: the changes are committed (and synced when synchronous is FULL). On failure the
  // transaction is still open, so the destructor rolls it back.
  Status commit(CallSite where = CallSite::here());
  Status rollback(CallSite where = CallSite::here());

 private:
  explicit Transaction(Database& db) : db_(&db) {}
  void abandon() noexcept;
  Database* db_;  // null once committed, rolled back or moved from
};

struct Migration {
  int version;           // 1, 2, 3, ... strictly increasing
  std::string_view sql;  // one or more statements taking the schema from version-1 to version
};

// The schema version recorded in the file (PRAGMA user_version); 0 for a new database.
Result<int> schema_version(Database& db, CallSite where = CallSite::here());

// Brings the schema up to the last migration's version. Each pending migration runs in its own
// BEGIN IMMEDIATE transaction together with its user_version bump, and the version is re-read
// inside that transaction, so processes migrating the same file at once each apply it once.
// A failing migration is rolled back (earlier ones stay); a file whose version is newer than the
// last migration is refused untouched. Versions must be positive and strictly increasing.
Status migrate(Database& db, std::span<const Migration> migrations,
               CallSite where = CallSite::here());

}  // namespace cudaagent
