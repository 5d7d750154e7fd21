// Common flags and the tool runner. The signal handler only stores the signal number in an
// atomic: stages poll it between records, so every complete record is flushed before the exit.
#include "cudaagent/records/cli.h"

#include <CLI/CLI.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <simdjson.h>
#include <sqlite3.h>

#include <charconv>
#include <cstdlib>

#include "cudaagent/base/exit_codes.h"
#include "cudaagent/base/terminal_text.h"
#include "cudaagent/base/version.h"

namespace cudaagent {
namespace {

// The base and records areas' libraries, then what the program's own areas added.
VersionList all_versions(const CommonOptions& common) {
  VersionList versions = base_versions();
  versions.emplace_back("simdjson", std::to_string(simdjson::SIMDJSON_VERSION_MAJOR) + "." +
                                        std::to_string(simdjson::SIMDJSON_VERSION_MINOR) + "." +
                                        std::to_string(simdjson::SIMDJSON_VERSION_REVISION));
  versions.emplace_back("CLI11", CLI11_VERSION);
  versions.emplace_back("SQLite", sqlite3_libversion());
  versions.insert(versions.end(), common.versions.begin(), common.versions.end());
  return versions;
}


// The one piece of process-wide state: a signal handler can reach nothing else. Sessions see
// it through a const reference.
std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int signal_number) { g_stop_signal.store(signal_number); }

void install_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocking read returns EINTR and the stage can stop
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal_number, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a closed pipe becomes EPIPE, handled as a quiet end
}

bool parse_u64(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

Result<ShardSpec> parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  ShardSpec spec;
  if (slash == std::string_view::npos || !parse_u64(text.substr(0, slash), spec.index) ||
      !parse_u64(text.substr(slash + 1), spec.count) || spec.count == 0 ||
      spec.index >= spec.count) {
    return Status::error("--shard takes I/N with 0 <= I < N, not '" + std::string(text) + "'");
  }
  return spec;
}

Result<ShardSpec> shard_from_slurm(const char* task_id, const char* task_min,
                                   const char* task_count) {
  if (task_id == nullptr || task_count == nullptr) return ShardSpec{};
  std::uint64_t id = 0, low = 0, count = 0;
  if (!parse_u64(task_id, id) || !parse_u64(task_count, count) ||
      (task_min != nullptr && !parse_u64(task_min, low)) || count == 0 || id < low ||
      id - low >= count) {
    return Status::error("SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_MIN/SLURM_ARRAY_TASK_COUNT do not "
                         "describe a shard; pass --shard I/N");
  }
  return ShardSpec{id - low, count};
}

InputKind input_kind(const std::vector<std::string>& inputs, bool makes_records, int stdin_fd) {
  if (makes_records) return InputKind::kMadeHere;
  for (const std::string& input : inputs) {
    if (input != "-") return InputKind::kFiles;
  }
  struct stat st {};
  if (::fstat(stdin_fd, &st) == 0 && S_ISREG(st.st_mode)) return InputKind::kStdinFile;
  return InputKind::kStdinStream;
}

Result<ShardChoice> choose_shard(std::string_view flag_text, InputKind kind, const char* task_id,
                                 const char* task_min, const char* task_count) {
  if (!flag_text.empty()) {
    auto spec = parse_shard(flag_text);
    if (!spec) return spec.status();
    ShardChoice choice{spec.value(), {}};
    if (spec.value().count > 1) {
      choice.note = "shard " + std::string(flag_text) + " (--shard)";
    }
    return choice;
  }
  auto slurm = shard_from_slurm(task_id, task_min, task_count);
  if (!slurm) return slurm.status();
  const ShardSpec array = slurm.value();
  if (array.count <= 1) return ShardChoice{};
  const std::string which = std::to_string(array.index) + "/" + std::to_string(array.count);
  if (kind == InputKind::kStdinStream) {
    return ShardChoice{ShardSpec{}, "input is a stream: every record it brings is handled here "
                                    "(Slurm array task " + which + ": the stage that starts the "
                                    "pipeline took this task's share; --shard I/N splits again)"};
  }
  return ShardChoice{array, "shard " + which + " (from SLURM_ARRAY_TASK_ID)"};
}

void add_progress_flag(CLI::App& app, CommonOptions& options) {
  app.add_option("--progress-every", options.progress_interval,
                 "Seconds between progress lines when stderr is not a terminal (0: none)")
      ->type_name("SECONDS")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
}

void add_common_flags(CLI::App& app, CommonOptions& options) {
  app.add_option("input", options.inputs, "Input JSONL files ('-' or none: stdin)")
      ->type_name("FILE");
  app.add_option("-o,--output", options.output, "Write records to FILE (atomically, on success)")
      ->type_name("FILE")
      ->capture_default_str();
  app.add_option("--errors", options.errors,
                 "Write error records to FILE instead of with the records")
      ->type_name("FILE");
  app.add_option("--shard", options.shard_text,
                 "Handle shard I of N (default in a Slurm array task: the task's shard when the "
                 "input is files, none when it is a pipe)")
      ->type_name("I/N");
  app.add_option("--db", options.db, "SQLite store for durable results and caching")
      ->type_name("FILE");
  app.add_option("-j,--jobs", options.jobs, "Parallel workers, for stages that have them")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_flag("-q,--quiet", options.quiet, "No progress or summary on stderr");
  add_progress_flag(app, options);
  app.add_option("--max-bad-lines", options.max_bad_lines,
                 "Fail (exit 1) after more malformed lines than this, or at once when an "
                 "input's first lines are all malformed; negative: no limit")
      ->capture_default_str();
  app.add_option("--max-record-bytes", options.max_record_bytes,
                 "Longest accepted record in bytes; longer lines become error records")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{2}, std::uint64_t{1} << 34));
}

int run_tool(const std::string& program, CLI::App& app, CommonOptions& common, int argc,
             char** argv, const std::function<Result<StageEnd>(Session&)>& body) {
  bool show_version = false;
  app.add_flag("-V,--version", show_version, "Print the version of this program and its dependencies");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return kExitOk;
  } catch (const CLI::ParseError& error) {
    if (show_version) {  // --version needs no subcommand or required argument
      std::fputs(version_text(program, all_versions(common)).c_str(), stdout);
      return kExitOk;
    }
    // The error quotes the arguments, which may carry anyone's bytes.
    std::fprintf(stderr, "%s: %s\nTry '%s --help'.\n", program.c_str(),
                 printable_text(error.what()).c_str(), program.c_str());
    return kExitUsage;
  }
  if (show_version) {
    std::fputs(version_text(program, all_versions(common)).c_str(), stdout);
    return kExitOk;
  }
  Logger log(program, stderr, common.quiet);
  auto shard = choose_shard(common.shard_text, input_kind(common.inputs, common.makes_records),
                            std::getenv("SLURM_ARRAY_TASK_ID"), std::getenv("SLURM_ARRAY_TASK_MIN"),
                            std::getenv("SLURM_ARRAY_TASK_COUNT"));
  if (!shard) {
    log.error(shard.status().message());
    return kExitUsage;
  }
  common.shard = shard.value().shard;
  common.shard_note = shard.value().note;
  if (!common.shard_note.empty()) log.info(common.shard_note);

  install_signal_handlers();
  Clock clock;
  Session session{log, clock, g_stop_signal};
  Result<StageEnd> end = Status::error("the stage did not run");
  try {
    end = body(session);
  } catch (const std::exception& error) {  // simdjson/CLI11/std exceptions end here, not in lib/
    end = Status::error(std::string("internal error: ") + error.what());
  }
  if (const int signal_number = g_stop_signal.load(); signal_number != 0) {
    if (signal_number != SIGPIPE) {
      // Worded as every stopped wait's Status ("stopped by signal 15 (SIGTERM)").
      const char* name = ::sigabbrev_np(signal_number);
      log.warn("stopped by signal " + std::to_string(signal_number) +
               (name != nullptr ? " (SIG" + std::string(name) + ")" : std::string()) + ": exit " +
               std::to_string(kExitSignalBase + signal_number));
    }
    return kExitSignalBase + signal_number;
  }
  if (!end) {
    log.error(end.status().message());
    return kExitFailure;
  }
  return end.value() == StageEnd::kPipeClosed ? kExitSignalBase + SIGPIPE : kExitOk;
}

int run_tool(const std::string& program, const std::string& description, CommonOptions& common,
             int argc, char** argv, const std::function<void(CLI::App&)>& add_flags,
             const std::function<Result<StageEnd>(Session&)>& body) {
  CLI::App app{description, program};
  add_flags(app);
  return run_tool(program, app, common, argc, argv, body);
}

}  // namespace cudaagent
