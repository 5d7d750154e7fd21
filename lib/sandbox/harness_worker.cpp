// HarnessWorker: the trusted side of share/harness/worker.py's line protocol.
#include "cudaagent/sandbox/harness_worker.h"

#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <random>
#include <utility>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/session.h"

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

// Reads how a job's child ended from the worker's final answer. False when it says neither.
// `strays_survived`: the worker could not end what the job left running (it must be replaced).
bool read_answer(simdjson::dom::object answer, ProcessResult& result, bool& strays_survived) {
  std::int64_t code = -1;
  if (!answer["exit"].get(code)) {
    result.outcome = ProcessResult::Outcome::kExited;
    result.exit_code = static_cast<int>(code);
  } else if (!answer["signal"].get(code)) {
    result.outcome = ProcessResult::Outcome::kSignaled;
    result.signal = static_cast<int>(code);
  } else {
    return false;
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
  std::int64_t strays = 0;
  if (!answer["stray_processes"].get(strays) && strays > 0) {
    result.stray_processes = static_cast<int>(std::min<std::int64_t>(strays, 1 << 30));
  }
  strays_survived = false;
  if (answer["strays_survived"].get(strays_survived)) strays_survived = false;
  return true;
}

}  // namespace

Status HarnessWorker::launch() {
  if (stopping()) return stop_here();
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
  stop_ = options_.stop != nullptr ? options_.stop : command.spec.stop;
  process_->watch_stop(stop_);
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
  if (!line) {
    process_.reset();  // stopped, or the pipe failed: nothing of this worker is kept
    return line.status();
  }
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

std::string HarnessWorker::request_json(const HarnessJob& job, const std::string& nonce,
                                        bool interactive) const {
  std::string request;
  JsonWriter out(request);
  out.begin_object().field("job", nonce).field("script", job.script);
  out.key("argv").begin_array();
  for (const auto& arg : job.args) out.value(arg);
  out.end_array().field("stdin", job.stdin_data).field("cwd", job.working_dir);
  out.key("limits").begin_object();
  if (job.limits.cpu_seconds) out.field("cpu_seconds", static_cast<std::int64_t>(*job.limits.cpu_seconds));
  if (job.limits.data_bytes) out.field("data_bytes", static_cast<std::int64_t>(*job.limits.data_bytes));
  if (job.limits.address_space_bytes) {
    out.field("address_space_bytes", static_cast<std::int64_t>(*job.limits.address_space_bytes));
  }
  if (job.limits.file_size_bytes) {
    out.field("file_size_bytes", static_cast<std::int64_t>(*job.limits.file_size_bytes));
  }
  if (job.limits.processes) out.field("processes", static_cast<std::int64_t>(*job.limits.processes));
  out.end_object().field("output_cap", static_cast<std::int64_t>(job.output_cap));
  if (!job.cpus.empty()) {
    out.key("cpus").begin_array();
    for (int cpu : job.cpus) out.value(static_cast<std::int64_t>(cpu));
    out.end_array();
  }
  if (!job.scrub_dirs.empty()) {
    out.key("scrub").begin_array();
    for (const auto& dir : job.scrub_dirs) out.value(dir);
    out.end_array();
  }
  if (interactive) out.field("interactive", true);
  out.end_object();
  request.push_back('\n');
  return request;
}

Result<ProcessResult> HarnessWorker::run(const HarnessJob& job) {
  if (auto warm = warm_up(); !warm) return warm.status();
  const std::string nonce = make_nonce();
  const std::string request = request_json(job, nonce, false);

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
    if (stopping()) return stop_here();
    // A worker that died between jobs: start a fresh one and send again, once.
    if (Status status = start(); !status) return status;
    if (Status again = process_->send(request, 10); !again) {
      process_.reset();
      return again;
    }
  }
  auto line = process_->receive_line(job.timeout_seconds, kMaxAnswerBytes);
  if (!line) {
    process_.reset();  // a stop, or a broken pipe: the job and its worker end here
    return line.status();
  }
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
  bool strays_survived = false;
  if (!read_answer(answer, result, strays_survived)) {
    process_.reset();
    return Status::error("the harness worker's answer says neither exit nor signal");
  }
  if (strays_survived) process_.reset();  // what survived dies with the worker's sandbox
  return result;
}

Result<HarnessSession> HarnessWorker::open_session(const HarnessJob& job) {
  if (auto warm = warm_up(); !warm) return warm.status();
  const std::string nonce = make_nonce();
  const std::string request = request_json(job, nonce, true);
  if (Status sent = process_->send(request, 10); !sent) {
    if (stopping()) return stop_here();
    if (Status status = start(); !status) return status;
    if (Status again = process_->send(request, 10); !again) {
      process_.reset();
      return again;
    }
  }
  return HarnessSession(this, nonce, std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count());
}

HarnessSession::HarnessSession(HarnessWorker* worker, std::string nonce, double started)
    : worker_(worker), nonce_(std::move(nonce)), started_(started) {}

HarnessSession::HarnessSession(HarnessSession&& other) noexcept
    : worker_(std::exchange(other.worker_, nullptr)),
      nonce_(std::move(other.nonce_)),
      started_(other.started_) {}

HarnessSession& HarnessSession::operator=(HarnessSession&& other) noexcept {
  if (this != &other) {
    abort();
    worker_ = std::exchange(other.worker_, nullptr);
    nonce_ = std::move(other.nonce_);
    started_ = other.started_;
  }
  return *this;
}

HarnessSession::~HarnessSession() { abort(); }

void HarnessSession::abort() {
  if (worker_ != nullptr) worker_->process_.reset();
  worker_ = nullptr;
}

Status HarnessSession::send(std::string_view line, double timeout_seconds) {
  if (worker_ == nullptr || !worker_->process_) return Status::error("the timing session has ended");
  std::string message;
  JsonWriter out(message);
  out.begin_object().field("job", nonce_).field("send", line).end_object();
  message.push_back('\n');
  if (Status sent = worker_->process_->send(message, timeout_seconds); !sent) {
    abort();
    return sent;
  }
  return Status::ok();
}

Result<HarnessSession::Message> HarnessSession::receive(double timeout_seconds) {
  Message message;
  if (worker_ == nullptr || !worker_->process_) return Status::error("the timing session has ended");
  auto line = worker_->process_->receive_line(timeout_seconds, kMaxAnswerBytes);
  if (!line) {
    abort();
    return line.status();
  }
  const double now = std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count();
  switch (line.value().kind) {
    case Subprocess::Line::Kind::kTimeout: return message;
    case Subprocess::Line::Kind::kClosed:
      abort();
      message.kind = Message::Kind::kEnded;
      message.result.outcome = ProcessResult::Outcome::kSignaled;
      message.result.signal = SIGKILL;
      message.result.err = "the harness worker died during the session";
      message.result.wall_seconds = now - started_;
      return message;
    case Subprocess::Line::Kind::kTooLong:
      abort();
      return Status::error("the harness worker sent a line over the size limit");
    case Subprocess::Line::Kind::kLine: break;
  }
  simdjson::dom::parser parser;
  simdjson::dom::object answer;
  std::string_view job_id;
  if (parser.parse(line.value().text).get(answer) || answer["job"].get(job_id) || job_id != nonce_) {
    abort();
    return Status::error("the harness worker answered something that is not this session's");
  }
  std::string_view text;
  if (!answer["line"].get(text)) {
    message.kind = Message::Kind::kLine;
    message.text = std::string(text);
    return message;
  }
  message.kind = Message::Kind::kEnded;
  bool strays_survived = false;
  if (!read_answer(answer, message.result, strays_survived)) {
    abort();
    return Status::error("the harness worker's answer says neither exit nor signal");
  }
  if (strays_survived) {
    abort();  // what survived dies with the worker's sandbox
    return message;
  }
  worker_ = nullptr;  // the worker is free for the next job
  return message;
}

Result<ProcessResult> HarnessSession::close(double timeout_seconds) {
  if (worker_ == nullptr) return Status::error("the timing session has ended");
  std::string message;
  JsonWriter out(message);
  out.begin_object().field("job", nonce_).field("close", true).end_object();
  message.push_back('\n');
  (void)worker_->process_->send(message, 10);
  const auto deadline = SteadyClock::now() + std::chrono::duration<double>(timeout_seconds);
  while (true) {
    const double left = std::chrono::duration<double>(deadline - SteadyClock::now()).count();
    if (left <= 0) {
      abort();
      ProcessResult result;
      result.outcome = ProcessResult::Outcome::kTimedOut;
      result.signal = SIGKILL;
      result.timeout_seconds = timeout_seconds;
      return result;
    }
    auto received = receive(left);
    if (!received) return received.status();
    if (received.value().kind == Message::Kind::kEnded) return received.value().result;
  }
}

}  // namespace cudaagent
