// HarnessWorker: the trusted side of share/harness/worker.py's line protocol.
#include "cudaagent/harness_worker.h"

#include <simdjson.h>

#include <chrono>
#include <csignal>
#include <random>

#include "cudaagent/json_writer.h"
#include "cudaagent/paths.h"
#include "cudaagent/session.h"

namespace cudaagent {
namespace {

using SteadyClock = std::chrono::steady_clock;

double since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// A job nonce the answer must repeat: an answer to anything else is not ours.
std::string make_nonce() {
  std::random_device device;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", device(), device());
  return text;
}

std::string log_tail(const std::string& path) {
  std::string text;
  if (path.empty() || !read_whole_file(path, text)) return {};
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.size() > 600) text = "..." + text.substr(text.size() - 600);
  return text;
}

constexpr std::size_t kMaxAnswerBytes = std::size_t{16} << 20;

}  // namespace

Status HarnessWorker::launch() {
  if (process_ && process_->running()) return Status::ok();
  process_.reset();
  ready_ = false;
  versions_.clear();
  ++starts_;
  SandboxCommand command;
  if (options_.wrap) {
    auto wrapped = options_.wrap(options_.process);
    if (!wrapped) return wrapped.status();
    command = std::move(wrapped).value();
  } else {
    command.spec = options_.process;
  }
  auto spawned = Subprocess::spawn(command.spec, options_.log_path);
  if (!spawned) return Status::error("cannot start the harness worker: " + spawned.status().message());
  process_.emplace(std::move(spawned).value());
  return Status::ok();
}

Status HarnessWorker::await_ready() {
  if (ready_) return Status::ok();
  const auto failed = [&](const std::string& why) {
    process_.reset();
    const std::string tail = log_tail(options_.log_path);
    return Status::error("the harness worker " + why + (tail.empty() ? "" : ": " + tail));
  };
  if (!process_) return failed("is not running");
  auto line = process_->receive_line(options_.start_timeout_seconds, 1 << 16);
  if (!line) return line.status();
  if (line.value().kind == Subprocess::Line::Kind::kTimeout) {
    return failed("did not start within " + std::to_string(static_cast<int>(options_.start_timeout_seconds)) + " s");
  }
  if (line.value().kind != Subprocess::Line::Kind::kLine) return failed("exited while starting");
  simdjson::dom::parser parser;
  simdjson::dom::object hello;
  bool ready = false;
  if (parser.parse(line.value().text).get(hello) || hello["ready"].get(ready) || !ready) {
    return failed("sent an unexpected greeting");
  }
  simdjson::dom::object versions;
  if (!hello["versions"].get(versions)) {
    for (auto field : versions) {
      std::string_view text;
      if (!field.value.get(text)) versions_.emplace(std::string(field.key), std::string(text));
    }
  }
  ready_ = true;
  return Status::ok();
}

Status HarnessWorker::start() {
  process_.reset();
  if (Status status = launch(); !status) return status;
  return await_ready();
}

Result<double> HarnessWorker::warm_up() {
  if (ready_ && process_ && process_->running()) return 0.0;
  const auto started = SteadyClock::now();
  if (Status status = launch(); !status) return status;
  if (Status status = await_ready(); !status) return status;
  return since(started);
}

Result<ProcessResult> HarnessWorker::run(const HarnessJob& job) {
  if (auto warm = warm_up(); !warm) return warm.status();
  const std::string nonce = make_nonce();
  std::string request;
  JsonWriter out(request);
  out.begin_object().field("job", nonce).field("script", job.script);
  out.key("argv").begin_array();
  for (const auto& arg : job.args) out.value(arg);
  out.end_array().field("stdin", job.stdin_data).field("cwd", job.working_dir);
  out.key("limits").begin_object();
  if (job.limits.cpu_seconds) out.field("cpu_seconds", static_cast<std::int64_t>(*job.limits.cpu_seconds));
  if (job.limits.address_space_bytes) {
    out.field("address_space_bytes", static_cast<std::int64_t>(*job.limits.address_space_bytes));
  }
  if (job.limits.file_size_bytes) {
    out.field("file_size_bytes", static_cast<std::int64_t>(*job.limits.file_size_bytes));
  }
  out.end_object().field("output_cap", static_cast<std::int64_t>(job.output_cap)).end_object();
  request.push_back('\n');

  ProcessResult result;
  const auto started = SteadyClock::now();
  const auto worker_lost = [&](ProcessResult::Outcome outcome) {
    process_.reset();  // kills the worker and everything in its sandbox
    result.outcome = outcome;
    result.signal = SIGKILL;
    result.timeout_seconds = job.timeout_seconds;
    result.wall_seconds = since(started);
    return result;
  };
  if (Status sent = process_->send(request, 10); !sent) {
    // A worker that died between jobs: start a fresh one and send again, once.
    if (Status status = start(); !status) return status;
    if (Status again = process_->send(request, 10); !again) return again;
  }
  auto line = process_->receive_line(job.timeout_seconds, kMaxAnswerBytes);
  if (!line) return line.status();
  switch (line.value().kind) {
    case Subprocess::Line::Kind::kTimeout: return worker_lost(ProcessResult::Outcome::kTimedOut);
    case Subprocess::Line::Kind::kClosed:
      result.err = "the harness worker died during the job";
      return worker_lost(ProcessResult::Outcome::kSignaled);
    case Subprocess::Line::Kind::kTooLong:
      process_.reset();
      return Status::error("the harness worker sent an answer over the size limit");
    case Subprocess::Line::Kind::kLine: break;
  }
  simdjson::dom::parser parser;
  simdjson::dom::object answer;
  std::string_view job_id;
  if (parser.parse(line.value().text).get(answer) || answer["job"].get(job_id) || job_id != nonce) {
    process_.reset();
    return Status::error("the harness worker answered something that is not this job's answer");
  }
  std::int64_t code = -1;
  if (!answer["exit"].get(code)) {
    result.outcome = ProcessResult::Outcome::kExited;
    result.exit_code = static_cast<int>(code);
  } else if (!answer["signal"].get(code)) {
    result.outcome = ProcessResult::Outcome::kSignaled;
    result.signal = static_cast<int>(code);
  } else {
    process_.reset();
    return Status::error("the harness worker's answer says neither exit nor signal");
  }
  std::string_view output;
  if (!answer["output"].get(output)) result.err = std::string(output);
  bool truncated = false;
  if (!answer["truncated"].get(truncated)) result.err_truncated = truncated;
  double value = 0;
  if (!answer["wall_seconds"].get(value)) result.wall_seconds = value;
  if (!answer["user_cpu_seconds"].get(value)) result.user_cpu_seconds = value;
  if (!answer["system_cpu_seconds"].get(value)) result.system_cpu_seconds = value;
  std::int64_t rss = 0;
  if (!answer["max_rss_bytes"].get(rss) && rss > 0) result.max_rss_bytes = static_cast<std::uint64_t>(rss);
  return result;
}

}  // namespace cudaagent
