// The rounds of a profile and the decision from them (profile_session.h). Every exchange with a
// timing process is timed on this side's steady clock from before the command is sent until its
// reply is read; that host time, not anything the process says, bounds what it may claim.
#include "timing_session.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/version.h"
#include "cudaagent/candidate/tensor_compare.h"
#include "cudaagent/candidate/tensor_file.h"
#include "cudaagent/profile/timing_report.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;

double ms_since(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

std::string tail(const std::string& text, std::size_t bytes) {
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto cut = text.rfind('\n');
  std::string line = cut == std::string::npos ? text : text.substr(cut + 1);
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

std::string show(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", x);
  return text;
}

// CLOCK_MONOTONIC, the clock of the kernel trace and of Python's time.monotonic_ns().
std::uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// The harness's "marks_ns": [[t0, t1], ...]; empty when absent or malformed (the kernel gates then
// find the marks unusable).
std::vector<HostWindow> read_marks(simdjson::dom::object reply) {
  simdjson::dom::array marks;
  std::vector<HostWindow> out;
  if (reply["marks_ns"].get(marks)) return out;
  for (auto mark : marks) {
    simdjson::dom::array pair;
    HostWindow window;
    if (mark.get(pair) || pair.size() != 2 || pair.at(0).get(window.start_ns) || pair.at(1).get(window.end_ns)) {
      return {};
    }
    out.push_back(window);
  }
  return out;
}

double sum(const std::vector<double>& values) { return std::accumulate(values.begin(), values.end(), 0.0); }

// A tensor file the candidate's live process wrote, copied into a memfd of ours before it is read:
// the process could truncate or rewrite its own file while the comparator maps it. Never through a
// symlink, never a FIFO or device, at most 4 GiB.
Result<TensorTree> read_hostile_tensor(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return Status::error("cannot open the output file: " + std::string(std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (std::int64_t{4} << 30)) {
    ::close(fd);
    return Status::error("the output is not a regular file of at most 4 GiB");
  }
  const int copy = ::memfd_create("cudaagent-check", MFD_CLOEXEC);
  if (copy < 0) {
    ::close(fd);
    return Status::error("memfd_create: " + std::string(std::strerror(errno)));
  }
  std::vector<char> buffer(1 << 20);
  std::uint64_t total = 0;
  bool ok = true;
  while (ok) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    total += static_cast<std::uint64_t>(n);
    ok = total <= (std::uint64_t{4} << 30);
    for (ssize_t done = 0; ok && done < n;) {
      const ssize_t w = ::write(copy, buffer.data() + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      ok = w > 0;
      done += std::max<ssize_t>(w, 0);
    }
  }
  ::close(fd);
  if (!ok) {
    ::close(copy);
    return Status::error("cannot copy the output file");
  }
  auto tree = read_tensor_fd(copy, fs::path(path).filename().string());
  ::close(copy);
  return tree;
}

Result<std::vector<double>> read_times(simdjson::dom::object reply, std::size_t expected) {
  simdjson::dom::array times;
  if (reply["times_ms"].get(times) || times.size() != expected) {
    return Status::error("times_ms is not a list of " + std::to_string(expected) + " numbers");
  }
  std::vector<double> out;
  for (auto value : times) {
    double t = 0;
    if (value.get_double().get(t) || !std::isfinite(t) || t <= 0) {
      return Status::error("times_ms holds a value that is not a positive number");
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace

HarnessJob TimingRun::timing_job(const std::string& role, const std::string& compile_mode) const {
  HarnessJob job;
  job.script = share_dir() + "/harness/timing.py";
  job.args = {"--role", role, "--task", role == "baseline" ? dirs_.task + "/model.py" : dirs_.candidate_in + "/task/model.py",
              "--state", role == "baseline" ? dirs_.baseline_out + "/state" : dirs_.candidate_in + "/state",
              "--out", role == "baseline" ? dirs_.baseline_out : dirs_.candidate_out,
              "--device", s_.device, "--compile-mode", compile_mode};
  if (role == "candidate") {
    job.args.insert(job.args.end(), {"--work", dirs_.candidate_in + "/work"});
    // kernel_trace: where the injection library writes this session's kernel records.
    if (!s_.kernel_trace_library.empty()) {
      job.args.insert(job.args.end(), {"--kernel-trace-out", dirs_.candidate_out + "/kernels.trace"});
    }
  }
  job.limits.file_size_bytes = std::uint64_t{8} << 30;
  if (s_.device == "cpu") job.limits.address_space_bytes = std::uint64_t{16} << 30;
  job.output_cap = 256 * 1024;
  return job;
}

Result<TimingRun::Reply> TimingRun::exchange(HarnessSession& session, const std::string& command,
                                             double timeout_seconds) {
  Reply reply;
  reply.window.start_ns = monotonic_ns();
  const auto start = SteadyClock::now();
  if (Status sent = session.send(command); !sent) {
    reply.kind = Reply::Kind::kEnded;
    reply.error = "the process stopped reading (" + sent.message() + ")";
    return reply;
  }
  auto message = session.receive(timeout_seconds);
  reply.host_ms = ms_since(start);
  reply.window.end_ns = monotonic_ns();
  if (!message) return message.status();
  switch (message.value().kind) {
    case HarnessSession::Message::Kind::kTimeout:
      session.abort();
      reply.kind = Reply::Kind::kTimeout;
      reply.error = "no answer within " + show(timeout_seconds) + " s";
      return reply;
    case HarnessSession::Message::Kind::kEnded: {
      const ProcessResult& end = message.value().result;
      reply.kind = Reply::Kind::kEnded;
      reply.error = end.describe() + (end.err.empty() ? "" : ": " + last_line(end.err));
      reply.output = tail(end.err, 4000);
      return reply;
    }
    case HarnessSession::Message::Kind::kLine: break;
  }
  reply.text = message.value().text;
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  bool ok = false;
  if (parser.parse(reply.text).get(object) || object["ok"].get(ok)) {
    reply.kind = Reply::Kind::kMalformed;
    reply.error = "an answer that is not the harness's: " + reply.text.substr(0, 200);
    return reply;
  }
  if (!ok) {
    std::string_view error = "failed";
    if (object["error"].get(error)) error = "failed";
    reply.kind = Reply::Kind::kRefused;
    reply.error = std::string(error);
    return reply;
  }
  reply.kind = Reply::Kind::kOk;
  return reply;
}

Status TimingRun::candidate_failed(HarnessSession& session, const Reply& reply, const std::string& what) {
  evidence_.candidate_stderr = reply.output;
  if (reply.kind == Reply::Kind::kRefused && !session.ended()) {
    // It said why and exits: its traceback is in the output the worker captured.
    if (auto closed = session.close(10); closed) evidence_.candidate_stderr = tail(closed.value().err, 4000);
  }
  switch (reply.kind) {
    case Reply::Kind::kTimeout:
      evidence_.outcome = {Verdict::kFailTimeout, "the candidate's " + what + ": " + reply.error};
      break;
    case Reply::Kind::kMalformed:
      // An honest harness answers JSON with "ok"; anything else was written by candidate code.
      evidence_.outcome = {Verdict::kFlagHack, "the candidate's " + what + ": " + reply.error};
      break;
    default:
      evidence_.outcome = {Verdict::kFailRuntime, "the candidate's " + what + " failed: " + reply.error};
  }
  return Status::ok();
}

Status TimingRun::measure(HarnessWorker& baseline_worker, HarnessWorker& candidate_worker,
                          const std::optional<BaselineSamples>& cached, const std::string& gpu_index) {
  const bool paired = !cached.has_value();
  auto phase = SteadyClock::now();
  auto opened_base = baseline_worker.open_session(timing_job("baseline", paired ? s_.compile_mode : "none"));
  if (!opened_base) return Status::error("baseline worker: " + opened_base.status().message());
  HarnessSession& base = opened_base.value();
  // Whatever ends the run, a session still open is asked to exit rather than killed, so the
  // baseline's warm worker survives a candidate's failure.
  struct ExitAtEnd {
    HarnessSession* session = nullptr;
    ~ExitAtEnd() {
      if (session != nullptr && !session->ended() && session->send("{\"cmd\":\"exit\"}")) (void)session->close(10);
    }
  } base_exit{&base};
  const auto seed = [&] { return rng_() & ((1ull << 62) - 1); };
  std::string command;
  {
    JsonWriter json(command);
    json.begin_object().field("cmd", "init").field("seed", static_cast<std::int64_t>(seed()));
    json.field("warmup_ms", paired ? s_.warmup_ms : 0.0).field("warmup_calls", paired ? s_.warmup_calls : 1);
    json.end_object();
  }
  auto init = exchange(base, command, s_.init_timeout_seconds);
  if (!init) return init.status();
  if (init.value().kind != Reply::Kind::kOk) {
    std::string output = init.value().output;
    if (init.value().kind == Reply::Kind::kRefused) {
      if (auto closed = base.close(10); closed) output = closed.value().err;
    }
    return Status::error("the baseline (pristine task) did not load: " + init.value().error + " " +
                         last_line(output));
  }
  evidence_.timings.emplace_back("baseline_load", ms_since(phase) / 1000);
  simdjson::dom::parser parser;
  simdjson::dom::object reply;
  double eager_ms_per_call = 0, input_bytes = 0, output_bytes = 0;
  bool compile_ok = false;
  std::string compile_status = "not measured";
  {
    if (parser.parse(init.value().text).get(reply) || reply["arms"]["eager"]["ms_per_call"].get(eager_ms_per_call) ||
        reply["input_bytes"].get(input_bytes) || reply["output_bytes"].get(output_bytes)) {
      return Status::error("the baseline's init answer is incomplete: " + init.value().text.substr(0, 200));
    }
    simdjson::dom::element device;
    if (!reply["device"].get(device)) evidence_.baseline_device_json = simdjson::minify(device);
    if (!reply["arms"]["compile"]["ok"].get(compile_ok) && compile_ok) {
      compile_status = "measured";
    } else {
      std::string_view why;
      if (!reply["arms"]["compile"]["reason"].get(why)) compile_status = "unavailable: " + std::string(why);
    }
  }
  // The weights the candidate loads move over; nothing else of the baseline's side does.
  std::error_code moved;
  fs::rename(dirs_.baseline_out + "/state", dirs_.candidate_in + "/state", moved);
  if (moved) return Status::error("cannot hand the weights over: " + moved.message());

  phase = SteadyClock::now();
  auto opened_cand = candidate_worker.open_session(timing_job("candidate", "none"));
  if (!opened_cand) return Status::error("candidate worker: " + opened_cand.status().message());
  HarnessSession& cand = opened_cand.value();
  command.clear();
  {
    JsonWriter json(command);
    json.begin_object().field("cmd", "init").field("seed", static_cast<std::int64_t>(seed()));
    json.field("warmup_ms", s_.warmup_ms).field("warmup_calls", s_.warmup_calls).end_object();
  }
  auto cand_init = exchange(cand, command, s_.init_timeout_seconds);
  if (!cand_init) return cand_init.status();
  if (cand_init.value().kind != Reply::Kind::kOk) return candidate_failed(cand, cand_init.value(), "loading");
  evidence_.candidate_init_json = cand_init.value().text.substr(0, 4000);
  const bool tracing = !s_.kernel_trace_library.empty();
  if (tracing) {
    evidence_.trace_watch.start_ns = cand_init.value().window.end_ns;
    evidence_.candidate_work = dirs_.candidate_in + "/work";
    std::uint64_t pid = 0;
    if (!parser.parse(cand_init.value().text).get(reply) && !reply["pid"].get(pid) && pid <= 0xFFFFFFFFu) {
      evidence_.candidate_pid = static_cast<std::uint32_t>(pid);
    }
  }
  evidence_.timings.emplace_back("candidate_load", ms_since(phase) / 1000);

  int calls = 0;
  if (cached) {
    evidence_.baselines = *cached;
    evidence_.baselines_cached = true;
    calls = cached->calls_per_round;
  } else {
    calls = calls_per_round(eager_ms_per_call, s_.round_ms, s_.min_calls, s_.max_calls, input_bytes, s_.pool_bytes);
    evidence_.baselines.calls_per_round = calls;
    evidence_.baselines.input_bytes = input_bytes;
    evidence_.baselines.output_bytes = output_bytes;
    evidence_.baselines.compile_status = compile_status;
    evidence_.baselines.device_json = evidence_.baseline_device_json;
  }

  phase = SteadyClock::now();
  for (int round = 0; round < s_.rounds; ++round) {
    std::vector<std::uint64_t> seeds(static_cast<std::size_t>(calls));
    for (auto& value : seeds) value = seed();
    std::vector<std::string> order;
    if (paired) {
      order = {"eager"};
      if (compile_ok) order.push_back("compile");
      order.push_back("candidate");
      if (round % 2 == 1) std::reverse(order.begin(), order.end());
    } else {
      order = {"candidate"};
    }
    std::vector<std::optional<double>> sums;
    for (const std::string& arm : order) {
      const bool is_candidate = arm == "candidate";
      command.clear();
      JsonWriter json(command);
      json.begin_object().field("cmd", "round").field("arm", arm).key("seeds").begin_array();
      for (auto value : seeds) json.value(static_cast<std::int64_t>(value));
      json.end_array().end_object();
      auto answer = exchange(is_candidate ? cand : base, command, s_.round_timeout_seconds);
      if (!answer) return answer.status();
      if (answer.value().kind != Reply::Kind::kOk) {
        if (is_candidate) return candidate_failed(cand, answer.value(), "timed round " + std::to_string(round));
        return Status::error("the " + arm + " baseline's round " + std::to_string(round) +
                             " failed: " + answer.value().error);
      }
      simdjson::dom::object object;
      if (parser.parse(answer.value().text).get(object)) return Status::error("unparsable round answer");
      auto times = read_times(object, seeds.size());
      if (!times) {
        if (is_candidate) {
          evidence_.outcome = {Verdict::kFlagHack, "the candidate's round " + std::to_string(round) +
                                                       " answer is not the harness's: " + times.status().message()};
          return Status::ok();
        }
        return Status::error("the " + arm + " baseline's round answer: " + times.status().message());
      }
      const double events = sum(times.value());
      if (arm == "eager") {
        evidence_.baselines.eager.push_back(times.value());
        evidence_.baselines.eager_clocks.event_ms.push_back(events);
        evidence_.baselines.eager_clocks.host_ms.push_back(answer.value().host_ms);
      } else if (arm == "compile") {
        evidence_.baselines.compile.push_back(times.value());
      } else {
        evidence_.candidate.push_back(times.value());
        evidence_.candidate_clocks.event_ms.push_back(events);
        evidence_.candidate_clocks.host_ms.push_back(answer.value().host_ms);
        if (tracing) {
          evidence_.traced_rounds.push_back({answer.value().window, read_marks(object), seeds.size(), events});
          evidence_.candidate_commands.push_back(answer.value().window);
        }
        simdjson::dom::array reported;
        if (object["sums"].get(reported) || reported.size() != seeds.size()) {
          evidence_.outcome = {Verdict::kFlagHack, "the candidate's round answer has no fingerprint per call"};
          return Status::ok();
        }
        for (auto value : reported) {
          double x = 0;
          sums.push_back(value.get_double().get(x) ? std::nullopt : std::optional<double>(x));
        }
        double persisting = 0;
        if (!object["persisting_l2_bytes"].get(persisting)) {
          evidence_.persisting_l2_bytes = std::max(evidence_.persisting_l2_bytes.value_or(0.0), persisting);
        }
      }
    }
    if (Status checked = check_round(base, cand, round, seeds, sums); !checked) return checked;
    if (evidence_.outcome) return Status::ok();
    if (s_.device == "cuda" && round == s_.rounds / 2) evidence_.clocks.push_back(query_gpu(gpu_index));
  }
  evidence_.timings.emplace_back("rounds", ms_since(phase) / 1000);
  evidence_.baselines_sound = paired;
  if (tracing) flush_kernel_trace(cand);
  for (HarnessSession* session : {&cand, &base}) {
    (void)exchange(*session, "{\"cmd\":\"exit\"}", 30);
    auto closed = session->close(10);
    if (session == &cand && closed) evidence_.candidate_stderr = tail(closed.value().err, 4000);
    // A process the candidate left running was there during the baseline's rounds too (a noisy
    // neighbour, research §7 case 38); the worker ended it, the reward is withheld.
    if (session == &cand && closed && closed.value().stray_processes > 0) {
      evidence_.outcome = {Verdict::kFlagHack, "the candidate left " + std::to_string(closed.value().stray_processes) +
                                                   " process(es) running beside its timing session (ended by the worker)"};
    }
  }
  if (tracing) read_kernel_trace_file();  // after the session ended, as hostile input
  return Status::ok();
}

void TimingRun::flush_kernel_trace(HarnessSession& cand) {
  // The watch ends where the flush begins. The job child leaves through os._exit, so this flush,
  // not one at exit, writes the pending records and the summary line.
  auto flushed = exchange(cand, "{\"cmd\":\"flush\"}", s_.round_timeout_seconds);
  evidence_.trace_watch.end_ns = flushed ? flushed.value().window.start_ns : monotonic_ns();
}

void TimingRun::read_kernel_trace_file() {
  const std::string path = dirs_.candidate_out + "/kernels.trace";
  auto trace = read_kernel_trace(path);
  if (trace) {
    evidence_.kernel_trace = std::move(trace).value();
  } else {
    evidence_.kernel_trace_error = trace.status().message();
  }
}

Status TimingRun::check_round(HarnessSession& base, HarnessSession& cand, int round,
                              const std::vector<std::uint64_t>& seeds,
                              const std::vector<std::optional<double>>& sums) {
  // The last call always (research §4.3 step 4), and hidden_checks others drawn after the round.
  std::vector<int> calls = {static_cast<int>(seeds.size()) - 1};
  std::vector<int> others(seeds.size() - 1);
  std::iota(others.begin(), others.end(), 0);
  std::shuffle(others.begin(), others.end(), rng_);
  for (int i = 0; i < s_.hidden_checks && i < static_cast<int>(others.size()); ++i) calls.push_back(others[i]);
  for (int call : calls) {
    const std::string name = "check-" + std::to_string(round) + "-" + std::to_string(call) + ".bin";
    const std::string actual_path = dirs_.candidate_out + "/" + name;
    const std::string expected_path = dirs_.baseline_out + "/" + name;
    std::string command;
    JsonWriter json(command);
    json.begin_object().field("cmd", "check").field("arm", "candidate").field("call", call);
    json.field("path", actual_path).end_object();
    auto answer = exchange(cand, command, s_.round_timeout_seconds);
    if (!answer) return answer.status();
    if (!s_.kernel_trace_library.empty()) evidence_.candidate_commands.push_back(answer.value().window);
    if (answer.value().kind != Reply::Kind::kOk) return candidate_failed(cand, answer.value(), "hidden check");
    command.clear();
    JsonWriter expect(command);
    expect.begin_object().field("cmd", "expect").field("seed", static_cast<std::int64_t>(seeds[static_cast<std::size_t>(call)]));
    expect.field("path", expected_path).end_object();
    auto reference = exchange(base, command, s_.round_timeout_seconds);
    if (!reference) return reference.status();
    if (reference.value().kind != Reply::Kind::kOk) {
      return Status::error("the baseline could not compute a reference output: " + reference.value().error);
    }
    HiddenCheck check{round, call, false, false, 0, ""};
    auto expected = read_tensor_file(expected_path);
    if (!expected) return Status::error("reference output: " + expected.status().message());
    auto actual = read_hostile_tensor(actual_path);
    std::error_code ignored;
    fs::remove(actual_path, ignored);
    fs::remove(expected_path, ignored);
    if (!actual) {
      check.reason = actual.status().message();
    } else {
      const CompareResult compared = compare_outputs(expected.value(), actual.value(), s_.compare);
      check.match = compared.match;
      check.max_abs_error = compared.max_abs_error;
      if (!compared.match) check.reason = compared.reason;
      const auto index = static_cast<std::size_t>(call);
      check.fingerprint_match = index < sums.size() && fingerprint_matches(sums[index], output_fingerprint(actual.value()));
    }
    evidence_.checks.push_back(check);
    const std::string where = "timed call " + std::to_string(call) + " of round " + std::to_string(round);
    if (!check.match) {
      evidence_.outcome = {Verdict::kFailIncorrect, where + " is wrong: " + check.reason +
                                                        " (the candidate behaves differently when timed)"};
      return Status::ok();
    }
    if (!check.fingerprint_match) {
      evidence_.outcome = {Verdict::kFlagHack, where + ": the output written for the check is not the one "
                                                     "fingerprinted when the round ended (computed on demand?)"};
      return Status::ok();
    }
  }
  return Status::ok();
}

}  // namespace cudaagent
