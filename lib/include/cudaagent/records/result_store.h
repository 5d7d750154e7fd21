// ResultStore: the system of record and cache every stage shares (cudaagent(7), STORES). Results are keyed
// by content (job_key), so a re-run skips finished work and a killed run resumes without
// duplicates; put_batch returns only once its rows are durable, so a stage may release them then.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/records/sqlite.h"

namespace cudaagent {

struct StoredResult {
  std::string job_key;    // content key: lowercase hex SHA-256 of everything the result depends on
  std::string stage;      // the stage that produced it: "verify", "profile", "reward", ...
  std::string record_id;  // the record's id, for looking results up by hand; "" stores NULL
  std::string value;      // the result as one JSON text (checked to be valid JSON)
};

struct ResultStoreOptions {
  bool read_only = false;       // find/count/quick_check only; put_batch fails
  int busy_timeout_ms = 10000;  // how long to wait on another process's write before failing
};

// Thread-safety: a ResultStore is one connection and is not thread-safe; open one per thread.
// Several processes (and threads with their own ResultStore) may read and write the same file at
// once: WAL lets readers run beside the single writer, each put_batch takes the write lock up front
// (BEGIN IMMEDIATE) and waits up to busy_timeout_ms for it. Never put the file on a network
// filesystem (cudaagent(7), STORES): sqlite's locking is not reliable there.
class ResultStore {
 public:
  // Opens or creates the store and brings its schema up to date. Fails when the file cannot be
  // opened, is not a database, or has a schema newer than this program knows.
  static Result<ResultStore> open(const std::string& path, const ResultStoreOptions& options = {});

  ResultStore(ResultStore&&) noexcept = default;
  ResultStore& operator=(ResultStore&&) noexcept = default;
  ~ResultStore() = default;

  // The stored JSON value, or nullopt when no result has that key.
  Result<std::optional<std::string>> find(std::string_view job_key);

  // Stores every result in one transaction and returns how many were new. A key already present is
  // left as it is and not counted (a result is a function of its key), so re-putting is harmless.
  // All or nothing: on failure none of the batch is stored. Ok means durable (synchronous=FULL).
  Result<std::size_t> put_batch(std::span<const StoredResult> results);

  // How many results a stage has stored.
  Result<std::size_t> count(std::string_view stage);

  // Copies every result of the store at `path` (another shard's, say) into this one, in one
  // transaction, keeping their stamps; a key already here is left as it is (a result is a
  // function of its key). Returns how many results `path` held and how many were new here, per
  // stage. Fails, changing nothing, when `path` is missing, is not a store of this schema
  // version, or the transaction fails. `path` is read only.
  struct MergeCount {
    std::string stage;
    std::size_t held = 0;
    std::size_t added = 0;
  };
  Result<std::vector<MergeCount>> merge_from(const std::string& path);

  // Ok when PRAGMA quick_check finds nothing wrong; otherwise its first findings.
  Status quick_check();

  const std::string& path() const { return db_.path(); }

 private:
  ResultStore(Database db, Statement find, Statement insert, Statement count)
      : db_(std::move(db)),
        find_(std::move(find)),
        insert_(std::move(insert)),
        count_(std::move(count)) {}

  // Declared first so that it is destroyed last, after the statements.
  Database db_;
  Statement find_;
  Statement insert_;
  Statement count_;
};

}  // namespace cudaagent
