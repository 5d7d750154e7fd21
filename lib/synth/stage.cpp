// The synth run: flags, the catalog, and the three producers (random composer, fixed chain, LLM
// proposals) writing task records through one writer. A task that cannot be made is an error
// record and the run goes on; only a catalog that cannot be loaded, a server that keeps failing
// or a write error end it early.
#include "cudaagent/synth/stage.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>

#include "cudaagent/base/files.h"
#include "cudaagent/llm/http.h"
#include "cudaagent/records/progress.h"
#include "cudaagent/records/record.h"
#include "cudaagent/records/record_sink.h"
#include "cudaagent/synth/kernelbench.h"
#include "cudaagent/synth/task.h"

namespace cudaagent {
namespace {

constexpr int kMaxDepth = 5;
constexpr int kMaxFailedRequestsInARow = 3;

Result<std::vector<double>> parse_numbers(std::string_view text) {
  std::vector<double> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string item(text.substr(start, comma - start));
    char* end = nullptr;
    const double value = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(value)) {
      return Status::error("takes comma-separated numbers, not '" + std::string(text) + "'");
    }
    out.push_back(value);
    start = comma + 1;
  }
  return out;
}

// Checks the flags against each other and the catalog. Throws CLI::ValidationError (exit 2).
void validate(CLI::App& app, SynthOptions& o) {
  if (app.count("--version") > 0) return;
  auto weights = parse_numbers(o.depth_weights);
  if (!weights) throw CLI::ValidationError("--depth-weights", weights.status().message());
  double total = 0;
  for (double w : weights.value()) {
    if (w < 0) throw CLI::ValidationError("--depth-weights", "weights must not be negative");
    total += w;
  }
  if (weights.value().size() > kMaxDepth || total <= 0) {
    throw CLI::ValidationError("--depth-weights", "give 1 to 5 weights (depths 1..5) with a positive sum");
  }
  o.settings.depth_weights = weights.value();
  auto window = parse_numbers(o.window);
  if (!window || window.value().size() != 2 || !(window.value()[0] > 0) ||
      !(window.value()[0] < window.value()[1])) {
    throw CLI::ValidationError("--window-ms", "takes LO,HI with 0 < LO < HI, not '" + o.window + "'");
  }
  o.settings.window_lo_ms = window.value()[0];
  o.settings.window_hi_ms = window.value()[1];
  o.settings.memory_bytes = o.memory_gib * static_cast<double>(1ull << 30);
  const bool llm = !o.llm.endpoint.empty();
  if (llm != !o.llm.model.empty()) {
    throw CLI::ValidationError("--endpoint", "LLM mode needs both --endpoint and --model");
  }
  if (llm && !o.common.shard_text.empty()) {
    throw CLI::ValidationError("--shard", "applies to the random composer; give each LLM job its own --seed");
  }

  const std::string path = o.catalog_path.empty() ? synth::default_catalog_path() : o.catalog_path;
  auto catalog = synth::load_catalog(path);
  if (!catalog) {
    o.catalog_error = catalog.status().message();
    return;
  }
  o.catalog = std::move(catalog).value();
  if (!o.ops.empty()) {
    auto allowed = synth::select_operators(o.catalog, o.ops);
    if (!allowed) throw CLI::ValidationError("--ops", allowed.status().message());
    o.allowed = std::move(allowed).value();
  } else {
    for (std::size_t i = 0; i < o.catalog.ops.size(); ++i) o.allowed.push_back(static_cast<int>(i));
  }
  if (!o.chain.empty()) {
    std::string_view rest = o.chain;
    while (!rest.empty()) {
      const std::size_t comma = std::min(rest.find(','), rest.size());
      const std::string name(rest.substr(0, comma));
      rest.remove_prefix(std::min(comma + 1, rest.size()));
      auto index = o.catalog.find(name);
      if (!index) {
        throw CLI::ValidationError("--chain", "unknown operator '" + name +
                                                  "' (cudaagent-synth --list shows the catalog)");
      }
      o.chain_ops.push_back({*index, {}});
    }
    if (o.chain_ops.size() > static_cast<std::size_t>(kMaxDepth)) {
      throw CLI::ValidationError("--chain", "at most 5 operators");
    }
  }
}

// Where records and error records go, with the bookkeeping for flushing and the summary.
class TaskWriter {
 public:
  static Result<std::unique_ptr<TaskWriter>> open(const CommonOptions& common) {
    auto out = RecordSink::open(common.output);
    if (!out) return out.status();
    auto writer = std::make_unique<TaskWriter>();
    writer->out_ = std::make_unique<RecordSink>(std::move(out).value());
    if (!common.errors.empty()) {
      auto errors = RecordSink::open(common.errors);
      if (!errors) return errors.status();
      writer->errors_ = std::make_unique<RecordSink>(std::move(errors).value());
    }
    return writer;
  }

  Status task(const std::string& record, std::size_t depth) {
    ++tasks;
    ++depths[depth];
    return write(*out_, record);
  }
  Status error(std::string_view source, std::uint64_t line, std::string_view reason, std::string_view raw) {
    ++errors;
    std::string record;
    append_error_record(record, ErrorContext{"synth", source, line}, reason, raw);
    return write(errors_ ? *errors_ : *out_, record);
  }
  bool pipe_closed() const { return out_->pipe_closed() || (errors_ && errors_->pipe_closed()); }
  Status commit() {
    if (auto s = out_->commit(); !s) return s;
    return errors_ ? errors_->commit() : Status::ok();
  }
  // A run that did not complete keeps what it wrote as FILE.partial (never under FILE).
  void keep_partial(Session& session) {
    for (RecordSink* sink : {out_.get(), errors_.get()}) {
      if (sink == nullptr) continue;
      auto kept = sink->keep_partial();
      if (!kept) {
        session.log.error(kept.status().message());
      } else if (!kept.value().empty()) {
        session.log.warn("the run did not complete: the tasks it made are in " +
                         cudaagent::quoted(kept.value()) + ", not " + cudaagent::quoted(sink->path()));
      }
    }
  }

  std::uint64_t tasks = 0, errors = 0, bytes = 0;
  std::map<std::size_t, std::uint64_t> depths;

 private:
  Status write(RecordSink& sink, const std::string& record) {
    bytes += record.size();
    auto status = sink.write(record);
    if (status && sink.interactive()) status = sink.flush();
    return status;
  }
  std::unique_ptr<RecordSink> out_, errors_;
};

std::string summary(const TaskWriter& w, double seconds) {
  std::string text = std::to_string(w.tasks) + " tasks (";
  for (const auto& [depth, n] : w.depths) {
    text += (text.back() == '(' ? "" : ", ") + std::string("depth ") + std::to_string(depth) + ": " +
            std::to_string(n);
  }
  char rate[64];
  std::snprintf(rate, sizeof rate, "), %llu error records, %.2f s",
                static_cast<unsigned long long>(w.errors), seconds);
  return text + rate;
}

Result<StageEnd> end_with(TaskWriter& writer, Status status, Session& session) {
  if (writer.pipe_closed()) return StageEnd::kPipeClosed;
  if (!status) {
    writer.keep_partial(session);
    return status;
  }
  if (session.stop_signal.load() != 0) {
    writer.keep_partial(session);
    return StageEnd::kCompleted;
  }
  if (auto s = writer.commit(); !s) return writer.pipe_closed() ? Result<StageEnd>(StageEnd::kPipeClosed) : s;
  return StageEnd::kCompleted;
}

// The random composer, or the fixed chain: task i of the count belongs to shard i mod N.
Status run_local(SynthOptions& o, const synth::Composer& composer, TaskWriter& writer, Session& session) {
  Progress progress(session, !o.common.quiet, o.common.progress_interval);
  const std::string source = o.chain_ops.empty() ? "random" : "chain";
  const std::uint64_t mine = (o.count + o.common.shard.count - 1 - o.common.shard.index) / o.common.shard.count;
  for (std::uint64_t index = 0; index < o.count; ++index) {
    if (session.stop_signal.load() != 0) break;
    if (!o.common.shard.owns(index)) continue;
    auto composition = o.chain_ops.empty() ? composer.compose(o.seed, index)
                                           : composer.compose_chain(o.chain_ops, o.seed, index);
    Status status = Status::ok();
    if (composition) {
      synth::TaskProvenance provenance{o.seed, index, source, {}};
      status = writer.task(synth::task_record(o.catalog, composition.value(), provenance),
                           composition.value().ops.size());
    } else {
      status = writer.error(source, index + 1, composition.status().message(), "");
    }
    if (!status) return status;
    progress.update(ProgressState{writer.tasks + writer.errors, writer.tasks + writer.errors, mine, {}});
  }
  if (writer.tasks == 0 && writer.errors > 0 && session.stop_signal.load() == 0) {
    return Status::error("no task could be composed (see the error records)");
  }
  return Status::ok();
}

Status run_llm(SynthOptions& o, const synth::Composer& composer, TaskWriter& writer, Session& session) {
  HttpGlobal global;
  if (!global.ok()) return Status::error("cannot initialise libcurl");
  HttpClient client;
  HttpRequest request;
  request.url = synth::chat_completions_url(o.llm.endpoint);
  request.timeout_seconds = o.timeout;
  request.headers = {"Content-Type: application/json"};
  if (!o.api_key_env.empty()) {
    const char* key = std::getenv(o.api_key_env.c_str());
    if (key == nullptr || *key == 0) {
      return Status::error("environment variable " + o.api_key_env + " (--api-key-env) is not set");
    }
    request.headers.push_back(std::string("Authorization: Bearer ") + key);
  }
  const RetryPolicy policy{o.retries, o.backoff, 30.0};
  const int per_request = std::max(1, o.llm.per_request);
  const std::uint64_t needed = (o.count + static_cast<std::uint64_t>(per_request) - 1) /
                               static_cast<std::uint64_t>(per_request);
  const std::uint64_t max_requests =
      o.max_requests > 0 ? static_cast<std::uint64_t>(o.max_requests) : 2 * needed + 2;
  std::uint64_t index = 0;  // proposal counter: each proposal draws from its own stream
  int failed_in_a_row = 0;
  std::uint64_t requests = 0;
  while (writer.tasks < o.count && requests < max_requests && session.stop_signal.load() == 0) {
    ++requests;
    request.body = synth::proposal_request_body(o.catalog, o.allowed, o.llm, o.settings.depth_weights,
                                                o.seed + requests - 1);
    auto response = client.post_with_retries(request, policy, session.stop_signal,
                                             [&](const std::string& why) {
                                               session.log.warn("request " + std::to_string(requests) +
                                                                ": " + why);
                                             });
    Result<std::string> content = Status::error("");
    if (!response) {
      content = response.status();
    } else if (response.value().status != 200) {
      std::string body = response.value().body.substr(0, 200);
      content = Status::error("POST " + cudaagent::quoted(request.url) + ": HTTP " +
                              std::to_string(response.value().status) + ": " + body);
    } else {
      content = synth::chat_completion_content(response.value().body);
      if (!content) content = content.status().with_context("POST " + cudaagent::quoted(request.url));
    }
    if (!content) {
      if (session.stop_signal.load() != 0) break;
      session.log.error(content.status().message());
      if (++failed_in_a_row >= kMaxFailedRequestsInARow) {
        return Status::error("giving up after " + std::to_string(failed_in_a_row) +
                             " failed requests in a row");
      }
      continue;
    }
    failed_in_a_row = 0;
    auto proposals = synth::parse_proposals(content.value(), o.catalog, o.allowed);
    if (!proposals) {
      if (auto s = writer.error(request.url, requests, "reply " + std::to_string(requests) + ": " +
                                                           proposals.status().message(),
                                content.value());
          !s) {
        return s;
      }
      continue;
    }
    for (const synth::Proposal& proposal : proposals.value()) {
      if (writer.tasks >= o.count) break;
      const std::uint64_t this_index = index++;
      Status status = Status::ok();
      if (!proposal.error.empty()) {
        status = writer.error(request.url, requests, proposal.error, proposal.raw);
      } else if (auto c = composer.compose_chain(proposal.chain, o.seed, this_index); !c) {
        status = writer.error(request.url, requests, c.status().message(), proposal.raw);
      } else {
        synth::TaskProvenance provenance{o.seed, this_index, "llm", o.llm.model};
        status = writer.task(synth::task_record(o.catalog, c.value(), provenance), c.value().ops.size());
      }
      if (!status) return status;
    }
  }
  if (writer.tasks < o.count && session.stop_signal.load() == 0) {
    session.log.warn("made " + std::to_string(writer.tasks) + " of " + std::to_string(o.count) +
                     " tasks in " + std::to_string(requests) + " requests (see --max-requests)");
  }
  return Status::ok();
}

// --import-kernelbench: problem I of the folder belongs to shard I mod N, like task I of a count.
Status run_import(SynthOptions& o, TaskWriter& writer, Session& session) {
  auto problems = synth::list_kernelbench(o.import_kernelbench);
  if (!problems) return problems.status();
  Progress progress(session, !o.common.quiet, o.common.progress_interval);
  const std::uint64_t total = problems.value().size();
  const std::uint64_t mine = (total + o.common.shard.count - 1 - o.common.shard.index) / o.common.shard.count;
  std::map<std::int64_t, std::uint64_t> levels;
  for (std::uint64_t index = 0; index < total; ++index) {
    if (session.stop_signal.load() != 0) break;
    if (!o.common.shard.owns(index)) continue;
    const synth::KernelBenchProblem& problem = problems.value()[index];
    std::string model_py;
    Status status = Status::ok();
    if (!read_whole_file(problem.path, model_py) || model_py.size() > (std::size_t{4} << 20)) {
      status = writer.error(o.import_kernelbench, index + 1, "cannot read " + cudaagent::quoted(problem.file) +
                                                                 " (or it is over 4 MiB)", "");
    } else {
      ++levels[problem.level];
      status = writer.task(synth::kernelbench_task_record(problem, model_py), 0);
    }
    if (!status) return status;
    progress.update(ProgressState{writer.tasks + writer.errors, writer.tasks + writer.errors, mine, {}});
  }
  std::string text;
  for (const auto& [level, count] : levels) {
    text += (text.empty() ? "" : ", ") + std::string("level ") + std::to_string(level) + ": " + std::to_string(count);
  }
  session.log.info("imported " + std::to_string(writer.tasks) + " KernelBench problems" +
                   (text.empty() ? std::string() : " (" + text + ")") + " from " + cudaagent::quoted(o.import_kernelbench));
  return Status::ok();
}

Result<StageEnd> list_catalog(const SynthOptions& o) {
  auto out = RecordSink::open(o.common.output);
  if (!out) return out.status();
  std::string text;
  for (int index : o.allowed) {
    const synth::OpEntry& e = o.catalog.ops[static_cast<std::size_t>(index)];
    text += e.name + "\t" + e.family + "\t" +
            (e.rank != 0 ? "rank " + std::to_string(e.rank) : "rank>=" + std::to_string(e.min_rank)) +
            "\ttorch>=" + (e.min_torch.empty() ? o.catalog.torch_floor : e.min_torch) + "\t" + e.doc + "\n";
  }
  auto status = out.value().write(text);
  if (status) status = out.value().commit();
  if (!status) return out.value().pipe_closed() ? Result<StageEnd>(StageEnd::kPipeClosed) : status;
  return StageEnd::kCompleted;
}

}  // namespace

// One option after another, as --help lists them: a table, kept in one place so that it reads as
// the help does.
void add_synth_flags(CLI::App& app, SynthOptions& o) {
  o.common.versions = llm_versions();
  o.common.makes_records = true;  // the start of a pipeline: it takes the Slurm array task's shard
  app.add_option("--seed", o.seed, "Seed; task I of a seed is the same in every run and shard")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 62));
  app.add_option("-n,--count", o.count, "Tasks to make (over all shards)")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  app.add_option("--depth-weights", o.depth_weights,
                 "Relative weights of depths 1..5 (CUDA Agent's data: 83.77% depth 2)")
      ->capture_default_str();
  app.add_option("--ops", o.ops, "Only these operators and families (comma-separated)")
      ->type_name("LIST");
  auto* chain = app.add_option("--chain", o.chain, "Exactly these operators, in order; sizes drawn")
                    ->type_name("LIST");
  app.add_option("--window-ms", o.window, "Window of estimated eager time, LO,HI milliseconds")
      ->capture_default_str();
  app.add_option("--batch", o.settings.batch, "Use this batch and ignore the window (quick CPU runs)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31));
  app.add_option("--max-dim", o.settings.max_dim, "Draw no size above this (with --batch: tiny tasks)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31));
  app.add_option("--memory-gib", o.memory_gib, "Most memory a task's tensors may take together")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  app.add_option("--attempts", o.settings.attempts, "Random compositions tried per task")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--fp32-tflops", o.settings.device.fp32_tflops, "Device model: FP32 matmul TFLOP/s")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--conv-tflops", o.settings.device.conv_tflops, "Device model: convolution TFLOP/s")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--bandwidth-tbs", o.settings.device.bandwidth_tbs, "Device model: memory TB/s")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--launch-us", o.settings.device.launch_us, "Device model: microseconds per kernel")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--catalog", o.catalog_path, "Operator catalog (default: the installed one)")
      ->type_name("FILE");
  auto* list = app.add_flag("--list", o.list, "Print the catalog (with --ops: that part) and exit");
  auto* import = app.add_option("--import-kernelbench", o.import_kernelbench, "Write KernelBench's "
                                "problems (its dataset folder of level1, level2, ..., or one level "
                                "folder) as task records instead of composing tasks")
                     ->type_name("DIR");
  import->excludes(list)->excludes(chain);
  app.add_option("-o,--output", o.common.output, "Write records to FILE (atomically, on success)")
      ->type_name("FILE")
      ->capture_default_str();
  app.add_option("--errors", o.common.errors, "Write error records to FILE instead of with the records")
      ->type_name("FILE");
  app.add_option("--shard", o.common.shard_text,
                 "Make only tasks I, I+N, ... (default in a Slurm array task: the task's shard)")
      ->type_name("I/N");
  app.add_flag("-q,--quiet", o.common.quiet, "No progress or summary on stderr");
  add_progress_flag(app, o.common);
  auto* endpoint = app.add_option("--endpoint", o.llm.endpoint,
                                  "LLM mode: OpenAI-compatible server URL")
                       ->type_name("URL");
  app.add_option("--model", o.llm.model, "LLM mode: model name")->type_name("NAME");
  app.add_option("--api-key-env", o.api_key_env, "LLM mode: environment variable holding the API key")
      ->type_name("VAR");
  app.add_option("--temperature", o.llm.temperature, "LLM mode: sampling temperature")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 2.0));
  app.add_option("--max-tokens", o.llm.max_tokens, "LLM mode: most tokens per reply")
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  app.add_option("--per-request", o.llm.per_request, "LLM mode: compositions asked for per request")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--max-requests", o.max_requests, "LLM mode: most requests (0: twice what --count needs, +2)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--timeout", o.timeout, "LLM mode: seconds per request")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--retries", o.retries, "LLM mode: retries of a failed request (HTTP 408/429/5xx, no answer)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  app.add_option("--backoff", o.backoff, "LLM mode: seconds before the first retry; doubles each time")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  chain->excludes(endpoint);
  import->excludes(endpoint);
  app.callback([&app, &o] { validate(app, o); });
}

Result<StageEnd> run_synth(SynthOptions& o, Session& session) {
  if (!o.import_kernelbench.empty()) {  // needs no catalog
    auto writer = TaskWriter::open(o.common);
    if (!writer) return writer.status();
    return end_with(*writer.value(), run_import(o, *writer.value(), session), session);
  }
  if (!o.catalog_error.empty()) return Status::error(o.catalog_error);
  if (o.list) return list_catalog(o);
  auto writer = TaskWriter::open(o.common);
  if (!writer) return writer.status();
  const synth::Composer composer(o.catalog, o.settings, o.allowed);
  const double start = session.clock.now_seconds();
  const Status status = o.llm.endpoint.empty() ? run_local(o, composer, *writer.value(), session)
                                               : run_llm(o, composer, *writer.value(), session);
  auto end = end_with(*writer.value(), status, session);
  if (end && end.value() == StageEnd::kCompleted && session.stop_signal.load() == 0) {
    session.log.info(summary(*writer.value(), session.clock.now_seconds() - start));
  }
  return end;
}

}  // namespace cudaagent
