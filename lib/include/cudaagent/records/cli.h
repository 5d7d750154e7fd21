// The behaviour every cudaagent program shares: the common flags from one function,
// Slurm-aware sharding, signal handling, and the mapping of outcomes to exit codes. Each tool adds
// its own flags to the same CLI11 app; defaults live in the options structs and --help shows them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cudaagent/base/session.h"
#include "cudaagent/base/status.h"
#include "cudaagent/base/version.h"
#include "cudaagent/records/stage_end.h"

// Declared only: the files that add flags include CLI11 (a header library); the files that only
// pass an app along, the programs' mains among them, need nothing but its name.
namespace CLI {
class App;
}  // namespace CLI

namespace cudaagent {

// This process handles records whose ordinal (0-based, over all non-blank input lines of all
// inputs, in order) is congruent to `index` modulo `count`.
struct ShardSpec {
  std::uint64_t index = 0;
  std::uint64_t count = 1;
  bool owns(std::uint64_t ordinal) const { return ordinal % count == index; }
};

// "I/N" with 0 <= I < N. A usage error (Status) otherwise.
Result<ShardSpec> parse_shard(std::string_view text);

// The shard Slurm assigns an array task: SLURM_ARRAY_TASK_ID minus SLURM_ARRAY_TASK_MIN (0 when
// unset) out of SLURM_ARRAY_TASK_COUNT. {0,1} when not in an array job; a Status if the values
// are inconsistent. The arguments are the variables' values (nullptr when unset).
Result<ShardSpec> shard_from_slurm(const char* task_id, const char* task_min, const char* task_count);

// Where a stage's records come from, which decides whether it shards by default.
enum class InputKind {
  kMadeHere,     // the stage makes its records (cudaagent-synth)
  kFiles,        // named files or directories
  kStdinFile,    // stdin redirected from a regular file
  kStdinStream,  // stdin is a pipe, a socket or a terminal: another stage feeds it
};

// kFiles when `inputs` names anything but "-"; otherwise what fstat says of `stdin_fd`.
InputKind input_kind(const std::vector<std::string>& inputs, bool makes_records, int stdin_fd = 0);

struct ShardChoice {
  ShardSpec shard;
  std::string note;  // for people: where the shard came from, or why there is none
};

// Shard once. `--shard I/N` (flag_text) always wins. Otherwise, inside a Slurm array task, only
// the stage that starts a pipeline takes the task's shard: one that makes its records or reads
// files (kMadeHere, kFiles, kStdinFile). A stage fed by a stream (kStdinStream) is downstream of
// one that already sharded, so it handles everything it is given ({0,1}) and the note says so;
// sharding there again would silently drop records. A Status for a bad --shard or inconsistent
// Slurm variables (the arguments are their values, nullptr when unset).
Result<ShardChoice> choose_shard(std::string_view flag_text, InputKind kind, const char* task_id,
                                 const char* task_min, const char* task_count);

struct CommonOptions {
  std::vector<std::string> inputs;   // files; none or "-" means stdin
  std::string output = "-";          // -o/--output
  std::string errors;                // --errors FILE; empty: error records go with the records
  std::string shard_text;            // --shard I/N, as given
  ShardSpec shard;                   // resolved from --shard or Slurm's variables
  std::string db;                    // --db: the SQLite store; empty: none
  int jobs = 1;                      // --jobs
  bool quiet = false;                // --quiet
  std::int64_t max_bad_lines = 1000;             // --max-bad-lines; negative: no limit
  std::uint64_t max_record_bytes = 64ull << 20;  // --max-record-bytes
  double progress_interval = 30;     // --progress-every: seconds between progress lines in a log
  bool makes_records = false;        // the stage makes its records (synth): see choose_shard
  std::string shard_note;            // how the shard was chosen, for the summary
  // What `--version` lists besides the base and records areas' libraries: a stage's flag function
  // appends the versions of the areas it links (libcurl, bubblewrap, ...).
  VersionList versions;
};

// Adds -o, --errors, --shard, --db, --jobs, --quiet, --progress-every, --max-bad-lines,
// --max-record-bytes and the positional INPUT... to `app`. `--version` and `--help` are added by
// run_tool.
void add_common_flags(CLI::App& app, CommonOptions& options);

// Adds --progress-every alone (for a stage that takes few of the common flags).
void add_progress_flag(CLI::App& app, CommonOptions& options);

// Parses the command line, resolves the shard (choose_shard), installs handlers (SIGINT, SIGTERM,
// SIGHUP set the session's stop signal; SIGPIPE ignored), builds the Session and runs `body`.
// Returns the exit code: --help/--version 0 (printed on stdout); usage errors 2; a failed Status 1
// (message on stderr); a stop signal N, after the body returned, 128+N (with a message, except
// for a closed pipe); StageEnd::kPipeClosed 141.
// `common.versions` are added to --version's list (libraries only this program links).
int run_tool(const std::string& program, CLI::App& app, CommonOptions& common, int argc,
             char** argv, const std::function<Result<StageEnd>(Session&)>& body);

// The same for a program with one command: the app is made here from `description`, and
// `add_flags` adds the program's flags to it, so that its main() needs no CLI11 of its own.
int run_tool(const std::string& program, const std::string& description, CommonOptions& common,
             int argc, char** argv, const std::function<void(CLI::App&)>& add_flags,
             const std::function<Result<StageEnd>(Session&)>& body);

}  // namespace cudaagent
