// The dedup stage: reference sets and then every kept task of the stream go into one similarity
// index; each task is scored against everything in it before it may join. Dropped tasks leave the
// stream (a filter's output should hold only what passed) and go to --dropped with their reasons,
// or stay, marked, with --annotate. Malformed tasks are error records, never silent drops.
#include "cudaagent/dedup/stage.h"

#include <CLI/CLI.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <unordered_map>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/dedup/features.h"
#include "cudaagent/dedup/measure.h"
#include "cudaagent/records/line_reader.h"
#include "cudaagent/records/record.h"
#include "cudaagent/records/record_sink.h"
#include "cudaagent/records/record_stage.h"

namespace cudaagent {
namespace {

static_assert(kDedupMeasure.starts_with(kAstTokensVersion),
              "the measure's name must change with the tokens");

constexpr std::string_view kStreamSet = "stream";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string helper_script() { return share_dir() + "/harness/ast_features.py"; }

// A task the filter rejected (filter.kept false) is not a candidate for the dataset: it travels on
// untouched, and it must not enter the index, where it could push out a valid look-alike after it.
bool rejected_upstream(simdjson::simdjson_result<simdjson::dom::element> filter) {
  bool kept = true;
  return !filter["kept"].get(kept) && !kept;
}

struct Tally {
  // tasks: records compared (error records and passed-through records are not tasks here)
  std::uint64_t tasks = 0, kept = 0, near_reference = 0, near_stream = 0, helper_restarts = 0;
  std::uint64_t rejected_upstream = 0;  // passed through untouched: the filter rejected them
  std::uint64_t comparisons = 0;
  double parse_seconds = 0, compare_seconds = 0;
};

class DedupStage final : public RecordStage {
 public:
  DedupStage(const DedupOptions& options, AstTokenizer tokenizer, RecordSink* dropped)
      : options_(options),
        tokenizer_(std::move(tokenizer)),
        dropped_(dropped),
        index_(options.common.jobs) {}

  std::string_view key() const override { return "dedup"; }

  // Adds one reference set to the index; entries that do not parse are skipped with a warning.
  Status add_references(const ReferenceSet& set, Session& session) {
    set_names_.push_back(set.name);
    std::vector<std::string_view> sources;
    for (const ReferenceTask& task : set.tasks) sources.push_back(task.source);
    auto answers = parse_in_parallel(sources, session);
    std::uint64_t added = 0;
    for (std::size_t i = 0; i < set.tasks.size(); ++i) {
      const ReferenceTask& task = set.tasks[i];
      auto fingerprint = fingerprint_of(task.source, std::move(answers[i]));
      if (!fingerprint) {
        if (fatal_) return *fatal_;
        session.log.warn("skipping reference " + cudaagent::quoted(set.name + "/" + task.name) +
                         ": " + fingerprint.status().message());
        continue;
      }
      index_.add(fingerprint.value());
      labels_.push_back({set_names_.size() - 1, task.name});
      ++added;
    }
    session.log.info("reference set " + cudaagent::quoted(set.name) + ": " + std::to_string(added) +
                     " of " + std::to_string(set.tasks.size()) + " tasks");
    return Status::ok();
  }

  // Parses, on --jobs helpers at once, the tasks of inputs that can be read twice (regular
  // files), so that process() finds them ready; stdin and pipes are parsed record by record.
  // The records read here are the ones the driver will hand over: the same shard, the same lines.
  Status parse_ahead(Session& session) {
    if (options_.common.jobs <= 1) return Status::ok();
    std::vector<std::string> inputs = options_.common.inputs;
    if (inputs.empty()) inputs.emplace_back("-");
    for (const std::string& input : inputs) {
      struct stat st {};
      if (input == "-" || ::stat(input.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return Status::ok();  // ordinals after this input are unknown: parse as records come
      }
    }
    std::vector<std::uint64_t> keys;
    std::vector<std::string> texts;
    RecordParser parser;
    std::uint64_t ordinal = 0;
    for (std::size_t n = 0; n < inputs.size(); ++n) {
      auto reader = LineReader::open(inputs[n], options_.common.max_record_bytes,
                                     &session.stop_signal);
      if (!reader) return reader.status();
      InputLine line;
      for (;;) {
        auto more = reader.value().next(line);
        if (!more) return more.status();
        if (!more.value()) break;
        const bool blank = line.bytes.find_first_not_of(" \t\r") == std::string_view::npos;
        if (!line.oversized && blank) continue;
        if (!options_.common.shard.owns(ordinal++) || line.oversized) continue;
        auto record = parser.parse(line.bytes);
        std::string_view source;
        if (!record || rejected_upstream(record.value()["filter"]) ||
            record.value()["task"]["model_py"].get(source)) {
          continue;
        }
        keys.push_back(ahead_key(n, line.number));
        texts.emplace_back(source);
      }
    }
    std::vector<std::string_view> sources(texts.begin(), texts.end());
    auto answers = parse_in_parallel(sources, session);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (answers[i]) ahead_.insert_or_assign(keys[i], std::move(*answers[i]));
    }
    session.log.info("parsed " + std::to_string(keys.size()) + " tasks ahead on " +
                     std::to_string(std::min<std::size_t>(options_.common.jobs, keys.size())) +
                     " AST helpers");
    return Status::ok();
  }

  RecordEdit process(const InputRecord& record) override {
    simdjson::dom::element task;
    if (record.object["task"].get(task)) {
      // An upstream stage's error record travels on untouched, neither lost nor wrapped twice.
      if (record.object["error"].error() == simdjson::SUCCESS) return RecordEdit::pass_through();
      return RecordEdit::error("task is missing");
    }
    if (!task.is_object()) return RecordEdit::error("task is not an object");
    if (rejected_upstream(record.object["filter"])) {
      ++tally_.rejected_upstream;
      return RecordEdit::pass_through();
    }
    simdjson::dom::element model;
    if (task["model_py"].get(model)) return RecordEdit::error("task.model_py is missing");
    std::string_view source;
    if (model.get_string().get(source)) return RecordEdit::error("task.model_py is not a string");
    std::optional<Result<ParsedSource>> ready;
    if (!ahead_.empty()) {
      const auto input = std::find(options_.common.inputs.begin(), options_.common.inputs.end(),
                                   record.source);
      const auto n = static_cast<std::size_t>(input - options_.common.inputs.begin());
      if (const auto it = ahead_.find(ahead_key(n, record.line)); it != ahead_.end()) {
        ready.emplace(std::move(it->second));
        ahead_.erase(it);
      }
    }
    auto fingerprint = fingerprint_of(source, std::move(ready));
    if (!fingerprint) return RecordEdit::error("task.model_py " + fingerprint.status().message());
    ++tally_.tasks;

    const auto start = std::chrono::steady_clock::now();
    tally_.comparisons += index_.size();
    const SimilarityIndex::Nearest nearest = index_.nearest(fingerprint.value());
    tally_.compare_seconds += seconds_since(start);

    const bool kept = !(nearest.score > options_.threshold);
    const Label* near = nearest.document ? &labels_[*nearest.document] : nullptr;
    std::string value;
    JsonWriter json(value);
    json.begin_object().field("kept", kept).field("score", nearest.score);
    json.field("shape", nearest.shape).field("ops", nearest.ops).key("nearest");
    if (near != nullptr) {
      json.begin_object().field("set", set_name(*near)).field("name", near->name).end_object();
    } else {
      json.null();
    }
    json.field("threshold", options_.threshold).field("measure", kDedupMeasure).end_object();

    if (kept) {
      ++tally_.kept;
      if (!options_.references_only) {
        index_.add(fingerprint.value());
        const std::string name =
            record.id.empty() ? std::string(record.source) + ":" + std::to_string(record.line)
                              : std::string(record.id);
        labels_.push_back({kStreamLabel, name});
      }
      return RecordEdit::set_key(std::move(value));
    }
    ++(near != nullptr && near->set == kStreamLabel ? tally_.near_stream : tally_.near_reference);
    if (dropped_ != nullptr) {
      const bool exists = record.object.at_key("dedup").error() == simdjson::SUCCESS;
      std::string line;
      if (Status appended = append_with_member(line, record.text, "dedup", value, exists);
          !appended) {
        return RecordEdit::error(appended.message());
      }
      dropped_pending_.append(line).push_back('\n');
    }
    if (options_.annotate) return RecordEdit::set_key(std::move(value));
    return RecordEdit::drop();
  }

  Status before_release() override {
    if (fatal_) return *fatal_;
    if (dropped_ == nullptr || dropped_pending_.empty()) return Status::ok();
    Status written = dropped_->write(dropped_pending_);
    dropped_pending_.clear();
    return written;
  }

  const Tally& tally() const { return tally_; }

 private:
  static constexpr std::size_t kStreamLabel = static_cast<std::size_t>(-1);
  struct Label {
    std::size_t set;  // index into set_names_, or kStreamLabel
    std::string name;
  };

  std::string_view set_name(const Label& label) const {
    return label.set == kStreamLabel ? kStreamSet : std::string_view(set_names_[label.set]);
  }

  static std::uint64_t ahead_key(std::size_t input, std::uint64_t line) {
    return (static_cast<std::uint64_t>(input) << 44) | line;
  }

  std::vector<std::optional<Result<ParsedSource>>> parse_in_parallel(
      const std::vector<std::string_view>& sources, Session& session) {
    if (options_.common.jobs <= 1 || sources.size() < 2) {
      return std::vector<std::optional<Result<ParsedSource>>>(sources.size());
    }
    const auto start = std::chrono::steady_clock::now();
    auto answers = parse_sources(tokenizer_.python(), helper_script(), sources,
                                 options_.common.jobs, tally_.helper_restarts, &session.stop_signal);
    tally_.parse_seconds += seconds_since(start);
    return answers;
  }

  // The source's fingerprint, or why there is none ("does not parse: SyntaxError ...", "has no
  // code ..."), from the answer parsed ahead when there is one. When the helper itself fails, the
  // reason says so and a new helper is started for the next task; if that fails too, fatal_ ends
  // the run at the next release.
  Result<Fingerprint> fingerprint_of(std::string_view source,
                                     std::optional<Result<ParsedSource>> ready = std::nullopt) {
    if (fatal_) return *fatal_;
    if (!ready) {
      const auto start = std::chrono::steady_clock::now();
      ready.emplace(tokenizer_.parse(source));
      tally_.parse_seconds += seconds_since(start);
      if (!*ready) {
        ++tally_.helper_restarts;
        auto restarted = AstTokenizer::start(tokenizer_.python(), helper_script());
        if (restarted) {
          tokenizer_ = std::move(restarted).value();
        } else {
          fatal_ = Status::error("cannot restart the AST helper: " + restarted.status().message());
        }
      }
    }
    const Result<ParsedSource>& parsed = *ready;
    if (!parsed) return Status::error("could not be parsed: " + parsed.status().message());
    if (!parsed.value().parsed) return Status::error("does not parse: " + parsed.value().error);
    Fingerprint fingerprint = make_fingerprint(parsed.value().tokens, parsed.value().ops);
    if (fingerprint.shape.empty()) {
      return Status::error("has no code to compare (only imports, docstrings or comments)");
    }
    return fingerprint;
  }

  const DedupOptions& options_;
  AstTokenizer tokenizer_;
  RecordSink* dropped_;
  SimilarityIndex index_;
  std::vector<std::string> set_names_;
  std::vector<Label> labels_;  // per index document
  std::string dropped_pending_;
  std::optional<Status> fatal_;
  Tally tally_;
  // Answers parsed ahead, by ahead_key(input index, line), taken by process().
  std::unordered_map<std::uint64_t, Result<ParsedSource>> ahead_;
};

}  // namespace

void add_dedup_flags(CLI::App& app, DedupOptions& options) {
  add_common_flags(app, options.common);
  app.remove_option(app.get_option("--db"));
  app.add_option("-r,--reference", options.references,
                 "Reference set: a directory of task .py files (searched recursively), a .py "
                 "file or a JSONL file of task records; repeatable")
      ->type_name("[NAME=]PATH")
      ->allow_extra_args(false)  // one PATH per --reference; later words are inputs
      ->check([](const std::string& value) -> std::string {
        const auto equals = value.find('=');
        if (equals != std::string::npos && value.substr(0, equals) == kStreamSet) {
          return "the set name 'stream' is reserved for the input stream";
        }
        return {};
      });
  app.add_option("-t,--threshold", options.threshold,
                 "Drop a task whose similarity to its nearest neighbour is above this")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--python", options.python,
                 "Python that runs the AST helper (default: $CUDAAGENT_PYTHON, python3 on PATH, "
                 "/usr/bin/python3)")
      ->type_name("PATH");
  app.add_option("--dropped", options.dropped,
                 "Also write dropped records, with their dedup key, to FILE")
      ->type_name("FILE");
  app.add_flag("--annotate", options.annotate,
               "Keep dropped records in the output (dedup.kept is false) instead of omitting them");
  app.add_flag("--references-only", options.references_only,
               "Compare tasks with the reference sets only, not with earlier tasks of the input");
}

Result<StageEnd> run_dedup(DedupOptions& options, Session& session) {
  auto tokenizer = start_ast_tokenizer(options.python);
  if (!tokenizer) return tokenizer.status();
  std::unique_ptr<RecordSink> dropped;
  if (!options.dropped.empty()) {
    auto opened = RecordSink::open(options.dropped);
    if (!opened) return opened.status();
    dropped = std::make_unique<RecordSink>(std::move(opened).value());
  }
  DedupStage stage(options, std::move(tokenizer).value(), dropped.get());
  for (const std::string& spec : options.references) {
    auto set = read_reference_set(spec, options.common.max_record_bytes, session);
    if (!set) return set.status();
    if (set.value().name == kStreamSet) {
      return Status::error("reference " + cudaagent::quoted(spec) +
                           ": the set name 'stream' is reserved; name it with NAME=PATH");
    }
    if (Status added = stage.add_references(set.value(), session); !added) return added;
  }
  if (Status ahead = stage.parse_ahead(session); !ahead) return ahead;
  StageCounts counts;
  auto end = run_record_stage(stage, options.common, session, &counts);
  if (!end) return end;
  if (end.value() == StageEnd::kPipeClosed) return end;  // a closed pipe ends quietly
  if (dropped) {
    if (auto finished = finish_sink(*dropped, session); !finished) return finished;
  }
  const Tally& tally = stage.tally();
  session.log.info(
      std::to_string(tally.kept) + " of " + std::to_string(tally.tasks) + " tasks kept, " +
      std::to_string(tally.tasks - tally.kept) + " above the threshold " +
      fixed(options.threshold, 3) + " (" + std::to_string(tally.near_reference) +
      " near a reference, " + std::to_string(tally.near_stream) + " near an earlier task)" +
      (options.annotate ? ", marked in the output" : ", left out of the output") + "; parsing " +
      fixed(tally.parse_seconds, 2) + " s, " + std::to_string(tally.comparisons) +
      " comparisons in " + fixed(tally.compare_seconds, 2) + " s" +
      (tally.rejected_upstream == 0
           ? std::string()
           : "; " + std::to_string(tally.rejected_upstream) +
                 " tasks the filter rejected passed through untouched") +
      (tally.helper_restarts == 0
           ? std::string()
           : "; the AST helper was restarted " + std::to_string(tally.helper_restarts) + " times"));
  return end;
}

}  // namespace cudaagent
