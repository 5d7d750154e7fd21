// Tests for the sqlite wrappers: values round-trip, every failure is a Status naming the operation,
// sqlite's reason and the caller's line, transactions roll back unless committed, and migrations
// apply once, in order, and refuse a schema from the future.
#include "cudaagent/records/sqlite.h"

#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_support.h"

using cudaagent::Database;
using cudaagent::DatabaseOptions;
using cudaagent::Migration;
using cudaagent::Statement;
using cudaagent::Status;
using cudaagent::Transaction;

namespace {

using cudaagent::testing::TempDir;

Database open_or_fail(const std::string& path, const DatabaseOptions& options = {}) {
  auto db = Database::open(path, options);
  REQUIRE_MESSAGE(db.is_ok(), db.status().message());
  return std::move(db).value();
}

std::string one_text(Database& db, const std::string& sql) {
  auto statement = db.prepare(sql);
  REQUIRE_MESSAGE(statement.is_ok(), statement.status().message());
  auto row = statement.value().step();
  REQUIRE_MESSAGE(row.is_ok(), row.status().message());
  REQUIRE(row.value());
  return statement.value().column_text(0);
}

bool has_table(Database& db, const std::string& name) {
  return one_text(db, "SELECT count(*) FROM sqlite_schema WHERE name = '" + name + "'") == "1";
}

int version_of(Database& db) {
  auto version = cudaagent::schema_version(db);
  REQUIRE(version.is_ok());
  return version.value();
}

std::string at_line(int line) { return "(at sqlite.cpp:" + std::to_string(line) + ")"; }

}  // namespace

TEST_CASE("Database::open creates a WAL database with the requested settings") {
  TempDir dir;
  Database db = open_or_fail(dir.file("a.db"));
  CHECK(std::filesystem::exists(dir.file("a.db")));
  CHECK(one_text(db, "PRAGMA journal_mode") == "wal");
  CHECK(one_text(db, "PRAGMA synchronous") == "2");  // FULL
  CHECK(one_text(db, "PRAGMA busy_timeout") == "10000");
  CHECK(db.path() == dir.file("a.db"));

  DatabaseOptions normal;
  normal.synchronous = cudaagent::Synchronous::kNormal;
  normal.busy_timeout_ms = 250;
  Database second = open_or_fail(dir.file("a.db"), normal);
  CHECK(one_text(second, "PRAGMA synchronous") == "1");
  CHECK(one_text(second, "PRAGMA busy_timeout") == "250");
}

TEST_CASE("Statement binds and reads back text, integers, reals, nulls and blobs") {
  Database db = open_or_fail(":memory:");
  REQUIRE(db.exec("CREATE TABLE t (s TEXT, i INTEGER, d REAL, n TEXT, b BLOB)").is_ok());
  auto insert = db.prepare("INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)");
  REQUIRE(insert.is_ok());
  const std::string text("it's\0 here", 10);  // embedded NUL and a quote survive
  const std::array<std::byte, 3> blob{std::byte{0}, std::byte{0xff}, std::byte{7}};
  insert.value().bind_text(1, text).bind_int64(2, -(std::int64_t{1} << 62)).bind_double(3, 0.25);
  insert.value().bind_null(4).bind_blob(5, blob);
  auto done = insert.value().step();
  REQUIRE_MESSAGE(done.is_ok(), done.status().message());
  CHECK_FALSE(done.value());
  CHECK(db.changes() == 1);
  CHECK(db.last_insert_rowid() == 1);

  insert.value().reset();  // bindings cleared: a second row of NULLs
  REQUIRE(insert.value().step().is_ok());

  auto select = db.prepare("SELECT s, i, d, n, b, typeof(b) FROM t ORDER BY rowid");
  REQUIRE(select.is_ok());
  Statement& row = select.value();
  CHECK(row.column_count() == 6);
  REQUIRE(row.step().value());
  CHECK(row.column_text(0) == text);
  CHECK(row.column_int64(1) == -(std::int64_t{1} << 62));
  CHECK(row.column_double(2) == 0.25);
  CHECK(row.column_is_null(3));
  CHECK(row.column_text(3).empty());
  CHECK(row.column_text(4) == std::string("\0\xff\x07", 3));
  CHECK(row.column_text(5) == "blob");
  REQUIRE(row.step().value());
  CHECK(row.column_is_null(0));
  CHECK(row.column_int64(1) == 0);
  CHECK_FALSE(row.step().value());
}

TEST_CASE("an empty blob is stored as an empty blob, not NULL") {
  Database db = open_or_fail(":memory:");
  auto select = db.prepare("SELECT typeof(?1)");
  REQUIRE(select.is_ok());
  REQUIRE(select.value().bind_blob(1, {}).step().value());
  CHECK(select.value().column_text(0) == "blob");
}

TEST_CASE("open failures name the file, sqlite's reason and the call site") {
  TempDir dir;
  DatabaseOptions no_create;
  no_create.create = false;
  const std::string missing = dir.file("missing.db");
  auto db = Database::open(missing, no_create);
  const int line = __LINE__ - 1;
  REQUIRE_FALSE(db.is_ok());
  CHECK(db.status().message() ==
        "cannot open '" + missing + "': unable to open database file " + at_line(line));
  CHECK_FALSE(std::filesystem::exists(missing));

  auto directory = Database::open(dir.file(""));
  REQUIRE_FALSE(directory.is_ok());
  CHECK(directory.status().message().starts_with("cannot open '" + dir.file("") + "': "));

  const std::string garbage = dir.file("garbage.db");
  std::ofstream(garbage) << std::string(4096, 'x');
  auto not_db = Database::open(garbage);
  REQUIRE_FALSE(not_db.is_ok());
  CHECK(not_db.status().message().find("file is not a database") != std::string::npos);

  DatabaseOptions read_only;
  read_only.read_only = true;
  CHECK_FALSE(Database::open(missing, read_only).is_ok());
}

TEST_CASE("bad SQL is a Status naming the statement, the reason and the line") {
  Database db = open_or_fail(":memory:");
  auto bad = db.prepare("SELEC 1");
  const int line = __LINE__ - 1;
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message() ==
        "cannot prepare 'SELEC 1': near \"SELEC\": syntax error " + at_line(line));

  Status exec = db.exec("CREATE TABLE t (x);\n  INSERT INTO nowhere VALUES (1)");
  REQUIRE_FALSE(exec.is_ok());
  CHECK(
      exec.message().starts_with("cannot execute 'CREATE TABLE t (x); INSERT INTO nowhere VALUES "
                                 "(1)': no such table: nowhere"));

  CHECK_FALSE(db.prepare("SELECT 1; SELECT 2").is_ok());
  CHECK_FALSE(db.prepare("  -- nothing").is_ok());
  CHECK(db.prepare("SELECT 1; -- a trailing comment\n").is_ok());

  const std::string long_sql = "SELECT '" + std::string(200, 'x') + "' FROM nowhere";
  auto long_error = db.prepare(long_sql);
  REQUIRE_FALSE(long_error.is_ok());
  CHECK(long_error.status().message().find("xxx...'") != std::string::npos);
  CHECK(long_error.status().message().size() < 200);
}

TEST_CASE("a failed bind is reported by the next step and cleared by reset") {
  Database db = open_or_fail(":memory:");
  auto select = db.prepare("SELECT ?1");
  REQUIRE(select.is_ok());
  select.value().bind_int64(1, 1).bind_int64(3, 7);
  const int line = __LINE__ - 1;
  auto row = select.value().step();
  REQUIRE_FALSE(row.is_ok());
  CHECK(row.status().message() ==
        "cannot bind an integer to parameter 3 of 'SELECT ?1': column index out of range " +
            at_line(line));
  select.value().reset();
  REQUIRE(select.value().bind_int64(1, 5).step().value());
  CHECK(select.value().column_int64(0) == 5);
}

TEST_CASE("constraint violations and read-only writes come back from step") {
  TempDir dir;
  const std::string path = dir.file("ro.db");
  {
    Database db = open_or_fail(path);
    REQUIRE(db.exec("CREATE TABLE t (k TEXT PRIMARY KEY)").is_ok());
    auto insert = db.prepare("INSERT INTO t VALUES (?1)");
    REQUIRE(insert.value().bind_text(1, "a").step().is_ok());
    insert.value().reset();
    auto again = insert.value().bind_text(1, "a").step();
    REQUIRE_FALSE(again.is_ok());
    CHECK(again.status().message().find("UNIQUE constraint failed: t.k") != std::string::npos);
  }
  DatabaseOptions read_only;
  read_only.read_only = true;
  Database db = open_or_fail(path, read_only);
  CHECK(one_text(db, "SELECT k FROM t") == "a");
  auto write = db.prepare("INSERT INTO t VALUES ('b')");
  REQUIRE(write.is_ok());
  auto step = write.value().step();
  REQUIRE_FALSE(step.is_ok());
  CHECK(step.status().message().find("attempt to write a readonly database") != std::string::npos);
}

TEST_CASE("a Transaction rolls back on destruction unless committed") {
  TempDir dir;
  Database db = open_or_fail(dir.file("tx.db"));
  REQUIRE(db.exec("CREATE TABLE t (x INTEGER)").is_ok());
  {
    auto tx = Transaction::begin(db);
    REQUIRE(tx.is_ok());
    CHECK(db.in_transaction());
    REQUIRE(db.exec("INSERT INTO t VALUES (1)").is_ok());
  }
  CHECK_FALSE(db.in_transaction());
  CHECK(one_text(db, "SELECT count(*) FROM t") == "0");
  {
    auto tx = Transaction::begin(db);
    REQUIRE(db.exec("INSERT INTO t VALUES (2)").is_ok());
    Transaction moved = std::move(tx).value();  // the moved-from one must not roll back
    REQUIRE(moved.commit().is_ok());
    CHECK_FALSE(moved.commit().is_ok());
  }
  CHECK(one_text(db, "SELECT count(*) FROM t") == "1");
  {
    auto tx = Transaction::begin(db);
    REQUIRE(db.exec("INSERT INTO t VALUES (3)").is_ok());
    REQUIRE(tx.value().rollback().is_ok());
  }
  CHECK(one_text(db, "SELECT group_concat(x) FROM t") == "2");
}

TEST_CASE("BEGIN IMMEDIATE waits busy_timeout for another writer, then reports the lock") {
  TempDir dir;
  const std::string path = dir.file("busy.db");
  Database holder = open_or_fail(path);
  DatabaseOptions impatient;
  impatient.busy_timeout_ms = 50;
  Database waiter = open_or_fail(path, impatient);
  auto held = Transaction::begin(holder);
  REQUIRE(held.is_ok());
  auto blocked = Transaction::begin(waiter);
  REQUIRE_FALSE(blocked.is_ok());
  CHECK(blocked.status().message().starts_with("cannot begin a transaction on '" + path +
                                               "': database is locked"));
  CHECK(one_text(waiter, "SELECT 1") == "1");  // WAL: reading beside a writer is fine
  REQUIRE(held.value().commit().is_ok());
  CHECK(Transaction::begin(waiter).is_ok());
}

TEST_CASE("a Statement may outlive its Database") {
  auto db = Database::open(":memory:");
  REQUIRE(db.is_ok());
  auto statement = db.value().prepare("SELECT 1");
  REQUIRE(statement.is_ok());
  Statement kept = std::move(statement).value();
  { Database gone = std::move(db).value(); }
  // The connection closes when `kept` is finalized; the sanitizer build checks nothing leaks.
}

TEST_CASE("migrate applies pending migrations once and in order") {
  TempDir dir;
  const std::string path = dir.file("m.db");
  // Not idempotent on purpose: applying either twice would fail.
  const std::array<Migration, 2> first{{
      {1, "CREATE TABLE a (x)"},
      {2, "CREATE TABLE b (y); INSERT INTO b VALUES (1)"},
  }};
  const std::array<Migration, 3> later{{first[0], first[1], {3, "CREATE TABLE c (z)"}}};

  Database db = open_or_fail(path);
  CHECK(version_of(db) == 0);
  REQUIRE(cudaagent::migrate(db, std::span(first).first(1)).is_ok());
  CHECK(version_of(db) == 1);
  CHECK(has_table(db, "a"));
  CHECK_FALSE(has_table(db, "b"));

  Status partial = cudaagent::migrate(db, first);
  REQUIRE_MESSAGE(partial.is_ok(), partial.message());
  CHECK(version_of(db) == 2);
  CHECK(has_table(db, "b"));

  REQUIRE(cudaagent::migrate(db, first).is_ok());  // nothing pending: a no-op
  Database other = open_or_fail(path);
  REQUIRE(cudaagent::migrate(other, later).is_ok());
  CHECK(version_of(db) == 3);
  CHECK(one_text(db, "SELECT count(*) FROM b") == "1");
  CHECK_FALSE(db.in_transaction());
}

TEST_CASE("migrate refuses a schema newer than the migrations it knows") {
  Database db = open_or_fail(":memory:");
  REQUIRE(db.exec("PRAGMA user_version = 5").is_ok());
  const std::array<Migration, 2> known{{{1, "CREATE TABLE a (x)"}, {2, "CREATE TABLE b (y)"}}};
  Status status = cudaagent::migrate(db, known);
  const int line = __LINE__ - 1;
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() ==
        "cannot use ':memory:': its schema version 5 is newer than this program knows (2) " +
            at_line(line));
  CHECK(version_of(db) == 5);
  CHECK_FALSE(has_table(db, "a"));
}

TEST_CASE("a failing migration is rolled back and earlier ones stay") {
  TempDir dir;
  Database db = open_or_fail(dir.file("fail.db"));
  const std::array<Migration, 3> migrations{{
      {1, "CREATE TABLE a (x)"},
      {2, "CREATE TABLE b (y); INSERT INTO nowhere VALUES (1)"},
      {3, "CREATE TABLE c (z)"},
  }};
  Status status = cudaagent::migrate(db, migrations);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message().starts_with("cannot migrate '" + dir.file("fail.db") +
                                     "' to schema version 2: cannot execute 'CREATE TABLE b"));
  CHECK(status.message().find("no such table: nowhere") != std::string::npos);
  CHECK(version_of(db) == 1);
  CHECK(has_table(db, "a"));
  CHECK_FALSE(has_table(db, "b"));
  CHECK_FALSE(has_table(db, "c"));
  CHECK_FALSE(db.in_transaction());
}

TEST_CASE("migrate refuses versions out of order") {
  Database db = open_or_fail(":memory:");
  const std::array<Migration, 2> unordered{{{2, "CREATE TABLE a (x)"}, {1, "CREATE TABLE b (y)"}}};
  CHECK_FALSE(cudaagent::migrate(db, unordered).is_ok());
  const std::array<Migration, 1> zero{{{0, "CREATE TABLE a (x)"}}};
  CHECK_FALSE(cudaagent::migrate(db, zero).is_ok());
  CHECK(version_of(db) == 0);
}
