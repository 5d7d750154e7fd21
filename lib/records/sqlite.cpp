// The sqlite3 wrappers behind cudaagent/sqlite.h. Each sqlite call that can fail is checked where
// it is made and turned into "cannot <operation>: <sqlite's errmsg> (at <caller file:line>)".
// Connections run in sqlite's multi-thread mode (no per-call mutex): one connection, one thread.
#include "cudaagent/records/sqlite.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>
#include <thread>
#include <utility>

#include "cudaagent/base/session.h"

namespace cudaagent {
namespace {

constexpr std::size_t kSqlSubjectLength = 60;

// "result_store.cpp:42": the basename is enough to find the line, and keeps messages short.
std::string call_site(const CallSite& where) {
  std::string_view file = where.file;
  if (const auto slash = file.rfind('/'); slash != std::string_view::npos) {
    file.remove_prefix(slash + 1);
  }
  return std::string(file) + ":" + std::to_string(where.line);
}

Status failure(std::string_view operation, std::string_view reason, const CallSite& where) {
  std::string message = "cannot ";
  message.append(operation).append(": ").append(reason);
  message.append(" (at ").append(call_site(where)).append(")");
  return Status::error(std::move(message));
}

// The SQL as a message subject: whitespace runs collapsed, long statements cut.
std::string sql_subject(std::string_view sql) {
  std::string flat;
  bool in_space = false;
  for (const char c : sql) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space) {
      in_space = !flat.empty();
      continue;
    }
    if (in_space) flat.push_back(' ');
    in_space = false;
    flat.push_back(c);
    if (flat.size() > kSqlSubjectLength) {
      flat.resize(kSqlSubjectLength);
      flat.append("...");
      break;
    }
  }
  return cudaagent::quoted(flat);
}

std::string errmsg(sqlite3* db, int rc) {
  return db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
}

// One-row pragmas during open, where a Statement is not needed outside.
Result<std::string> query_text(sqlite3* db, const char* sql, int* code = nullptr) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &raw, nullptr);
  std::string text;
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(raw);
    if (rc == SQLITE_ROW) {
      const auto* chars = sqlite3_column_text(raw, 0);
      if (chars != nullptr) text = reinterpret_cast<const char*>(chars);
      rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
      rc = SQLITE_OK;
    }
  }
  std::string reason = rc == SQLITE_OK ? "" : errmsg(db, rc);
  if (code != nullptr) *code = rc;
  sqlite3_finalize(raw);
  if (rc != SQLITE_OK) return Status::error(std::move(reason));
  return text;
}

Status exec_raw(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return Status::ok();
  std::string reason = error != nullptr ? error : errmsg(db, rc);
  sqlite3_free(error);
  return Status::error(std::move(reason));
}

bool is_memory_path(const std::string& path) {
  return path.empty() || path == ":memory:" || path.starts_with("file::memory:");
}

}  // namespace

// ---- Database ----

void Database::Closer::operator()(sqlite3* db) const {
  // close_v2 defers the close while Statements are alive, so a Statement outliving its Database
  // finalizes cleanly instead of leaking the connection.
  sqlite3_close_v2(db);
}

Database::Database(std::unique_ptr<sqlite3, Closer> db, std::string path)
    : db_(std::move(db)), path_(std::move(path)) {}

Result<Database> Database::open(const std::string& path, const DatabaseOptions& options,
                                CallSite where) {
  const std::string operation = "open " + cudaagent::quoted(path);
  int flags = SQLITE_OPEN_NOMUTEX;
  if (options.read_only) {
    flags |= SQLITE_OPEN_READONLY;
  } else {
    flags |= SQLITE_OPEN_READWRITE | (options.create ? SQLITE_OPEN_CREATE : 0);
  }
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  std::unique_ptr<sqlite3, Closer> db(raw);  // sqlite allocates a handle even when open fails
  if (rc != SQLITE_OK) return failure(operation, errmsg(raw, rc), where);
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);

  // sqlite opens lazily: reading the header now turns "not a database" or a directory into an
  // open error rather than a surprise at the first query. Writers racing to create or switch the
  // journal of one new file can get SQLITE_BUSY here without sqlite calling the busy handler (it
  // does not wait where waiting could deadlock), so these first steps are retried for as long as
  // busy_timeout_ms allows.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
  for (int attempt = 0;; ++attempt) {
    int code = SQLITE_OK;
    Status status = Status::ok();
    if (auto header = query_text(raw, "PRAGMA schema_version", &code); !header) {
      status = header.status();
    } else if (options.wal && !options.read_only && !is_memory_path(path)) {
      auto mode = query_text(raw, "PRAGMA journal_mode=WAL", &code);
      if (!mode) {
        status = mode.status();
      } else if (mode.value() != "wal") {
        return failure(operation,
                       "journal mode stays '" + mode.value() + "', wal is not supported here", where);
      }
    }
    if (status) break;
    if ((code & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= give_up) {
      return failure(operation, status.message(), where);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(5 << std::min(attempt, 4), 50)));
  }
  const std::string pragmas = std::string("PRAGMA foreign_keys=ON; PRAGMA synchronous=") +
                              (options.synchronous == Synchronous::kFull ? "FULL" : "NORMAL");
  if (Status status = exec_raw(raw, pragmas); !status) {
    return failure(operation, status.message(), where);
  }
  return Database(std::move(db), path);
}

Status Database::exec(std::string_view sql, CallSite where) {
  Status status = exec_raw(db_.get(), std::string(sql));
  if (!status) return failure("execute " + sql_subject(sql), status.message(), where);
  return status;
}

Result<Statement> Database::prepare(std::string_view sql, CallSite where) {
  const std::string operation = "prepare " + sql_subject(sql);
  if (sql.size() > static_cast<std::size_t>(INT_MAX)) {
    return failure(operation, "statement too long", where);
  }
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  const int rc =
      sqlite3_prepare_v2(db_.get(), sql.data(), static_cast<int>(sql.size()), &raw, &tail);
  Statement statement(raw);
  if (rc != SQLITE_OK) return failure(operation, errmsg(db_.get(), rc), where);
  if (raw == nullptr) return failure(operation, "no statement in the text", where);
  // Anything after the first statement would be silently ignored by sqlite; compile the rest to
  // tell a second statement from trailing whitespace or comments.
  const auto rest = static_cast<int>(sql.data() + sql.size() - tail);
  sqlite3_stmt* extra = nullptr;
  const int extra_rc = sqlite3_prepare_v2(db_.get(), tail, rest, &extra, nullptr);
  sqlite3_finalize(extra);
  if (extra_rc != SQLITE_OK || extra != nullptr) {
    return failure(operation, "more than one statement (use exec)", where);
  }
  return statement;
}

std::int64_t Database::changes() const { return sqlite3_changes64(db_.get()); }

std::int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }

bool Database::in_transaction() const { return sqlite3_get_autocommit(db_.get()) == 0; }

// ---- Statement ----

void Statement::Finalizer::operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }

Statement::Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}

void Statement::note_bind(int rc, std::string_view what, int index, CallSite where) {
  if (rc == SQLITE_OK || !bind_error_) return;  // the first failure is the one worth reporting
  bind_error_ = failure("bind " + std::string(what) + " to parameter " + std::to_string(index) +
                            " of " + sql_subject(sqlite3_sql(stmt_.get())),
                        errmsg(sqlite3_db_handle(stmt_.get()), rc), where);
}

Statement& Statement::bind_text(int index, std::string_view text, CallSite where) {
  note_bind(sqlite3_bind_text64(stmt_.get(), index, text.data(), text.size(), SQLITE_TRANSIENT,
                                SQLITE_UTF8),
            "text", index, where);
  return *this;
}

Statement& Statement::bind_int64(int index, std::int64_t value, CallSite where) {
  note_bind(sqlite3_bind_int64(stmt_.get(), index, value), "an integer", index, where);
  return *this;
}

Statement& Statement::bind_double(int index, double value, CallSite where) {
  note_bind(sqlite3_bind_double(stmt_.get(), index, value), "a real", index, where);
  return *this;
}

Statement& Statement::bind_null(int index, CallSite where) {
  note_bind(sqlite3_bind_null(stmt_.get(), index), "null", index, where);
  return *this;
}

Statement& Statement::bind_blob(int index, std::span<const std::byte> bytes, CallSite where) {
  // A null pointer would bind NULL rather than an empty blob.
  static constexpr std::byte kEmpty{};
  const void* data = bytes.empty() ? &kEmpty : bytes.data();
  note_bind(sqlite3_bind_blob64(stmt_.get(), index, data, bytes.size(), SQLITE_TRANSIENT), "a blob",
            index, where);
  return *this;
}

Result<bool> Statement::step(CallSite where) {
  if (!bind_error_) return bind_error_;
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return failure("run " + sql_subject(sqlite3_sql(stmt_.get())),
                 errmsg(sqlite3_db_handle(stmt_.get()), rc), where);
}

void Statement::reset() {
  // The code sqlite3_reset returns repeats the last step's failure, already reported by step().
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
  bind_error_ = Status::ok();
}

std::string Statement::column_text(int index) const {
  const auto* chars = sqlite3_column_text(stmt_.get(), index);
  if (chars == nullptr) return {};
  const auto size = static_cast<std::size_t>(sqlite3_column_bytes(stmt_.get(), index));
  return std::string(reinterpret_cast<const char*>(chars), size);
}

std::int64_t Statement::column_int64(int index) const {
  return sqlite3_column_int64(stmt_.get(), index);
}

double Statement::column_double(int index) const {
  return sqlite3_column_double(stmt_.get(), index);
}

bool Statement::column_is_null(int index) const {
  return sqlite3_column_type(stmt_.get(), index) == SQLITE_NULL;
}

int Statement::column_count() const { return sqlite3_column_count(stmt_.get()); }

// ---- Transaction ----

Result<Transaction> Transaction::begin(Database& db, CallSite where) {
  if (Status status = exec_raw(db.db_.get(), "BEGIN IMMEDIATE"); !status) {
    return failure("begin a transaction on " + cudaagent::quoted(db.path()), status.message(), where);
  }
  return Transaction(db);
}

Transaction::Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Transaction& Transaction::operator=(Transaction&& other) noexcept {
  if (this != &other) {
    abandon();
    db_ = std::exchange(other.db_, nullptr);
  }
  return *this;
}

Transaction::~Transaction() { abandon(); }

void Transaction::abandon() noexcept {
  // sqlite may already have rolled back by itself (SQLITE_FULL, SQLITE_IOERR, ...); a second
  // ROLLBACK would only fail.
  if (db_ != nullptr && db_->in_transaction()) {
    sqlite3_exec(db_->db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  db_ = nullptr;
}

Status Transaction::commit(CallSite where) {
  if (db_ == nullptr) return failure("commit", "the transaction is no longer open", where);
  Status status = exec_raw(db_->db_.get(), "COMMIT");
  if (status) {
    db_ = nullptr;
    return status;
  }
  std::string operation = "commit to " + cudaagent::quoted(db_->path());
  if (!db_->in_transaction()) db_ = nullptr;  // sqlite rolled it back; nothing left to undo
  return failure(operation, status.message(), where);
}

Status Transaction::rollback(CallSite where) {
  if (db_ == nullptr) return failure("roll back", "the transaction is no longer open", where);
  Database* db = std::exchange(db_, nullptr);
  if (!db->in_transaction()) return Status::ok();
  if (Status status = exec_raw(db->db_.get(), "ROLLBACK"); !status) {
    return failure("roll back on " + cudaagent::quoted(db->path()), status.message(), where);
  }
  return Status::ok();
}

// ---- Migrations ----

Result<int> schema_version(Database& db, CallSite where) {
  auto statement = db.prepare("PRAGMA user_version", where);
  if (!statement) return statement.status();
  auto row = statement.value().step(where);
  if (!row) return row.status();
  return static_cast<int>(row.value() ? statement.value().column_int64(0) : 0);
}

Status migrate(Database& db, std::span<const Migration> migrations, CallSite where) {
  const std::string subject = cudaagent::quoted(db.path());
  int previous = 0;
  for (const Migration& migration : migrations) {
    if (migration.version <= previous) {
      return failure("migrate " + subject,
                     "migration versions must be positive and increasing, got " +
                         std::to_string(migration.version) + " after " + std::to_string(previous),
                     where);
    }
    previous = migration.version;
  }
  const int latest = previous;

  auto found = schema_version(db, where);
  if (!found) return found.status();
  if (found.value() > latest) {
    return failure("use " + subject,
                   "its schema version " + std::to_string(found.value()) +
                       " is newer than this program knows (" + std::to_string(latest) + ")",
                   where);
  }
  for (const Migration& migration : migrations) {
    if (migration.version <= found.value()) continue;
    const std::string operation =
        "migrate " + subject + " to schema version " + std::to_string(migration.version);
    auto transaction = Transaction::begin(db, where);
    if (!transaction) return transaction.status();
    // Another process may have migrated while we waited for the write lock.
    found = schema_version(db, where);
    if (!found) return found.status();
    if (migration.version <= found.value()) continue;  // the Transaction rolls back a no-op
    if (Status status = db.exec(migration.sql, where); !status) {
      return status.with_context("cannot " + operation);
    }
    const std::string bump = "PRAGMA user_version = " + std::to_string(migration.version);
    if (Status status = db.exec(bump, where); !status) {
      return status.with_context("cannot " + operation);
    }
    if (Status status = transaction.value().commit(where); !status) return status;
    found = migration.version;
  }
  return Status::ok();
}

}  // namespace cudaagent
