// cudaagent-dedup as a library: options, flags, reference sets and the per-record stage, so the
// tool's main is a few lines and tests can drive each part in-process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudaagent/base/session.h"
#include "cudaagent/base/status.h"
#include "cudaagent/records/cli.h"

namespace cudaagent {

struct DedupOptions {
  CommonOptions common;
  std::vector<std::string> references;  // --reference [NAME=]PATH, in order
  double threshold = 0.9;               // drop when the nearest score is above this
  std::string python;                   // --python; empty: $CUDAAGENT_PYTHON, python3, ...
  std::string dropped;                  // --dropped FILE: dropped records go there
  bool annotate = false;                // --annotate: write dropped records downstream too
  bool references_only = false;         // --references-only: no comparison within the stream
};

// Adds the dedup flags and the common ones (without --db: the stage keeps no store).
void add_dedup_flags(CLI::App& app, DedupOptions& options);

// One task text of a reference set.
struct ReferenceTask {
  std::string name;    // path relative to the set's directory, or the record's id ("line N")
  std::string source;  // the module's source text
};

struct ReferenceSet {
  std::string name;  // NAME of NAME=PATH, else the last component of PATH
  std::vector<ReferenceTask> tasks;
};

// Reads "[NAME=]PATH": a directory (every *.py below it, recursively, in path order), a .py file,
// or a JSONL file of task records (task.model_py; named by "id", else "line N"). Entries that
// cannot be used (unreadable, larger than `max_bytes`, no task.model_py) are skipped with one
// warning each on `session`. A Status when PATH cannot be opened at all.
Result<ReferenceSet> read_reference_set(const std::string& spec, std::uint64_t max_bytes,
                                        Session& session);

// Runs the stage: loads the reference sets, starts the AST helper, then for every task record
// adds a "dedup" key (kept, score, nearest, threshold, measure). Records above the threshold are
// dropped (omitted downstream unless --annotate; written to --dropped). Returns as
// run_record_stage does; a Status also when a reference set or the AST helper is unusable.
Result<StageEnd> run_dedup(DedupOptions& options, Session& session);

}  // namespace cudaagent
