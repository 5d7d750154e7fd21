// The C++ side of an evaluation session: three warm workers, the owner session of the current
// task, and the runners attached to it. The owner does the work of every call; this side chooses
// the seeds (a secret until the call), decides how long anything may take, and ends what hangs.
#include "cudaagent/evaluation/evaluator.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "cudaagent/base/files.h"
#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/evaluation/session_messages.h"
#include "cudaagent/sandbox/harness_worker.h"

namespace cudaagent {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;

double since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n > 0) got += static_cast<std::size_t>(n);
  }
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex.push_back(digits[c >> 4]);
    hex.push_back(digits[c & 15]);
  }
  return hex;
}

// Connects to a socket the owner is accepting on and presents a token it will refuse: the way to
// end an "attach" whose runner died before it connected.
void cancel_accept(const std::string& socket_path) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.size() < sizeof(address.sun_path)) {
    std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      const char hello[] = "{\"token\": \"cancelled\"}";
      (void)::send(fd, hello, sizeof(hello) - 1, MSG_NOSIGNAL);
    }
  }
  ::close(fd);
}

}  // namespace

struct Evaluator::State {
  EvaluationSettings settings;
  TorchEnv torch;
  std::string harness, harness_hash;
  std::string root, owner_in, state_root, socket_root, candidate_in;
  std::string trace_path;  // the candidate runner's kernel trace; empty: not traced
  std::string baseline_trace_path;  // the baselines' runner's, written and never read; empty: not traced
  std::unique_ptr<RemovedTree> remove_root;
  std::unique_ptr<HarnessWorker> owner_worker, baseline_worker, candidate_worker;
  std::optional<HarnessSession> owner, baseline, candidate;
  std::string task_hash, task_path, state_dir;
  TaskInfo task;
  bool reused = false;
  CpuPlacement placement;

  ~State() {
    candidate.reset();
    baseline.reset();
    owner.reset();
    candidate_worker.reset();  // workers before the root: their sandboxes bind below it
    baseline_worker.reset();
    owner_worker.reset();
    remove_root.reset();
  }

  bool sandboxed() const { return static_cast<bool>(settings.sandbox); }

  std::string home_for(const std::string& role) const {
    return sandboxed() ? "/tmp/home" : root + "/home-" + role;
  }

  std::unique_ptr<HarnessWorker> make_worker(const std::string& role, std::vector<std::string> readable,
                                             std::vector<std::string> writable,
                                             std::optional<ProcessCredentials> run_as,
                                             const std::vector<std::string>& extra_env = {}) const {
    HarnessWorkerPlan plan;
    plan.python = torch.python;
    plan.harness_dir = harness;
    plan.log_path = root + "/" + role + "-worker.log";
    plan.env = harness_environment(home_for(role));
    plan.env.insert(plan.env.end(), extra_env.begin(), extra_env.end());
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
      plan.env.push_back(std::string("CUDA_VISIBLE_DEVICES=") + visible);
    }
    plan.readable = std::move(readable);
    plan.writable = std::move(writable);
    plan.run_as = run_as;
    plan.wrap = settings.sandbox;
    return make_harness_worker(plan);
  }

  HarnessJob job(const std::string& script, std::vector<std::string> args) const {
    HarnessJob job;
    job.script = harness + "/" + script;
    job.args = std::move(args);
    job.limits.data_bytes = settings.runner_data_bytes;
    job.limits.file_size_bytes = std::uint64_t{1} << 30;
    return job;
  }

  // The owner's next reply line, waiting at most `seconds`. Lines are the owner's only output on
  // its reply descriptor; a session that ended or timed out is a Status (the owner is then gone).
  int stop_requested() const { return settings.stop != nullptr ? settings.stop->load() : 0; }

  // The kernel trace's file: the one path the candidate's sandbox may write outside its own
  // size-capped /tmp and /dev/shm, bound there alone (not its directory, so no other file can be made beside
  // it), owned by the candidate's user when it has one; its size is held by the job's file-size
  // limit. Emptied by the trusted side before every candidate (empty_trace).
  Status prepare_trace(const std::string& library) {
    if (!std::filesystem::is_regular_file(library)) {
      return Status::error("the kernel trace library " + cudaagent::quoted(library) + " is not a file");
    }
    const std::string dir = root + "/trace";
    if (!make_directories(dir, 0711)) return Status::error("cannot create " + cudaagent::quoted(dir));
    trace_path = dir + "/candidate.jsonl";
    if (settings.trace_baselines) {
      baseline_trace_path = dir + "/baseline.jsonl";
      if (Status emptied = empty_trace(baseline_trace_path, std::nullopt); !emptied) return emptied;
    }
    return empty_trace(trace_path, settings.candidate_user);
  }

  Status empty_trace(const std::string& path, const std::optional<ProcessCredentials>& user) const {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return Status::error("cannot empty the kernel trace " + cudaagent::quoted(path));
    bool ok = true;
    if (user) ok = ::fchown(fd, user->uid, user->gid) == 0;
    ::close(fd);
    if (!ok) return Status::error("cannot give the kernel trace to the candidate's user");
    return Status::ok();
  }

  // Ends the task's processes at once (a stop request): the owner, and with it the runners' sessions.
  Status stopped(int signal) {
    if (candidate) candidate->abort();
    if (baseline) baseline->abort();
    candidate.reset();
    baseline.reset();
    if (owner) owner->abort();
    owner.reset();
    task_hash.clear();
    return Status::error("stopped by signal " + std::to_string(signal));
  }

  Result<std::string> owner_reply(double seconds) {
    const auto deadline = SteadyClock::now() + std::chrono::duration<double>(seconds);
    while (owner) {
      if (const int signal = stop_requested()) return stopped(signal);
      const double left = std::chrono::duration<double>(deadline - SteadyClock::now()).count();
      auto message = owner->receive(std::clamp(left, 0.0, 0.2));
      if (message && message.value().kind == HarnessSession::Message::Kind::kTimeout && left > 0.2) continue;
      if (!message) {
        owner.reset();
        return message.status();
      }
      switch (message.value().kind) {
        case HarnessSession::Message::Kind::kLine: return message.value().text;
        case HarnessSession::Message::Kind::kEnded: {
          const std::string tail = message.value().result.err.substr(
              message.value().result.err.size() > 2000 ? message.value().result.err.size() - 2000 : 0);
          owner.reset();
          return Status::error("the session owner ended (" + message.value().result.describe() + "): " + tail);
        }
        case HarnessSession::Message::Kind::kTimeout:
          owner->abort();
          owner.reset();
          return Status::error("the session owner did not answer within " +
                               std::to_string(static_cast<int>(seconds)) + " s");
      }
    }
    return Status::error("no session owner");
  }

  Status owner_send(const std::string& line) {
    if (!owner) return Status::error("no session owner");
    if (Status sent = owner->send(line); !sent) {
      owner.reset();
      return sent;
    }
    return Status::ok();
  }

  void end_runner(std::optional<HarnessSession>& runner, const std::string& arm) {
    if (!runner) return;
    if (owner) {
      (void)owner_send(owner_command("detach", arm));
      (void)owner_reply(30);
    }
    (void)runner->close(5);
    runner.reset();
  }

  void end_task() {
    end_runner(candidate, "candidate");
    end_runner(baseline, "baseline");
    if (owner) {
      (void)owner_send(owner_command("exit", ""));
      (void)owner->close(10);
      owner.reset();
    }
    task_hash.clear();
  }

  Result<RunnerStart> attach(const std::string& arm, HarnessWorker& worker, HarnessJob runner_job,
                             std::optional<HarnessSession>& slot);
};

Evaluator::Evaluator(std::unique_ptr<State> state) : state_(std::move(state)) {}
Evaluator::~Evaluator() {
  if (state_) state_->end_task();
}

int forwards_for_task(int requested, double input_bytes, double output_bytes) {
  const double slot = std::max(input_bytes + output_bytes, 1.0);
  const double fitting = std::floor(kSlotMemoryBytes / slot);
  return static_cast<int>(std::clamp(std::min(static_cast<double>(requested), fitting), 1.0, 64.0));
}

Result<double> call_spin_ms(const std::string& call_wait, const std::string& device) {
  if (call_wait == "spin") return kCallSpinMs;
  if (call_wait == "block") return 0.0;
  if (call_wait == "auto") return device == "cpu" ? 0.0 : kCallSpinMs;
  return Status::error("unknown call wait " + cudaagent::quoted(call_wait) + " (auto, spin or block)");
}

Result<std::string> resolve_call_timer(const std::string& call_timer, const std::string& device) {
  if (call_timer == "auto") return std::string(device == "cuda" ? "gpu" : "host");
  if (call_timer == "host" || call_timer == "gpu") return call_timer;
  return Status::error("unknown call timer " + cudaagent::quoted(call_timer) + " (auto, host or gpu)");
}

Result<std::string> resolve_forward_sync(const std::string& forward_sync, const std::string& device,
                                         int forwards_per_call, bool traced) {
  if (forward_sync == "auto") {
    return std::string(device == "cuda" && forwards_per_call == 1 && traced ? "call" : "each");
  }
  if (forward_sync == "each" || forward_sync == "call") return forward_sync;
  return Status::error("unknown forward sync " + cudaagent::quoted(forward_sync) + " (auto, each or call)");
}

double resolve_call_lead_us(double call_lead_us, const std::string& call_timer, const std::string& forward_sync) {
  if (call_lead_us != kAutoCallLead) return call_lead_us;
  return call_timer == "gpu" && forward_sync == "call" ? kCallLeadUs : 0.0;
}

Status resolve_call_timing(const std::string& device, int forwards_per_call, bool traced, std::string& call_timer,
                           std::string& forward_sync, double& call_lead_us) {
  auto timer = resolve_call_timer(call_timer, device);
  if (!timer) return timer.status();
  auto sync = resolve_forward_sync(forward_sync, device, forwards_per_call, traced);
  if (!sync) return sync.status();
  call_timer = timer.value();
  forward_sync = sync.value();
  call_lead_us = resolve_call_lead_us(call_lead_us, call_timer, forward_sync);
  return Status::ok();
}

Result<std::unique_ptr<Evaluator>> Evaluator::create(EvaluationSettings settings, TorchEnv torch) {
  auto timer = resolve_call_timer(settings.call_timer, settings.device);
  if (!timer) return timer.status();
  settings.call_timer = timer.value();
  if (auto spin = call_spin_ms(settings.call_wait, settings.device); !spin) return spin.status();
  if (settings.forward_sync != "each" && settings.forward_sync != "call") {
    return Status::error("unknown forward sync " + cudaagent::quoted(settings.forward_sync) + " (each or call)");
  }
  if (settings.call_timer == "gpu" && settings.device != "cuda") {
    return Status::error("the GPU call timer needs the cuda device (the CPU has no CUDA events)");
  }
  if (!(settings.call_lead_us >= 0 && settings.call_lead_us <= 10000)) {
    return Status::error("the call lead must be 0 to 10000 microseconds");
  }
  if (settings.call_lead_us > 0 && settings.call_timer != "gpu") {
    return Status::error("a call lead needs the GPU call timer (--call-timer gpu)");
  }
  auto state = std::make_unique<State>();
  if (settings.policy_path.empty()) settings.policy_path = share_dir() + "/harness/policy.json";
  state->harness = share_dir() + "/harness";
  std::string hashed;
  for (const char* name : {"session_owner.py", "session_runner.py", "session_layout.py", "compare.py",
                           "shared_buffers.py", "operator_audit.py", "confine.py", "worker.py", "call_wait.py",
                           "stream_flags.py"}) {
    std::string bytes;
    if (!read_whole_file(state->harness + "/" + name, bytes)) {
      return Status::error("cannot read the harness script '" + state->harness + "/" + name + "'");
    }
    hashed += sha256_hex(bytes);
  }
  std::string policy;
  if (!read_whole_file(settings.policy_path, policy)) {
    return Status::error("cannot read the operator policy '" + settings.policy_path + "'");
  }
  state->harness_hash = sha256_hex(hashed + sha256_hex(policy));
  if (settings.cpu_groups) {
    state->placement = place_session(allowed_cpus());
  } else {
    state->placement.note = "not asked: wherever the scheduler puts them";
  }
  auto root = make_private_dir(settings.scratch_dir, "cudaagent-eval");
  if (!root) return root.status();
  state->root = root.value();
  state->remove_root = std::make_unique<RemovedTree>(state->root, settings.keep_dirs);
  state->owner_in = state->root + "/task";
  state->state_root = state->root + "/state";
  state->socket_root = state->root + "/sockets";
  state->candidate_in = state->root + "/candidate";
  const bool other_user = settings.candidate_user.has_value();
  // With a candidate user, the directories it must reach are traversable (0711) and what it reads
  // is world-readable; nothing under the root is writable to it.
  if (other_user && ::chmod(state->root.c_str(), 0711) != 0) {
    return Status::error("cannot open " + cudaagent::quoted(state->root) + " to the candidate's user");
  }
  for (const auto& dir : {state->owner_in, state->state_root, state->socket_root,
                          state->socket_root + "/candidate", state->socket_root + "/baseline",
                          state->candidate_in}) {
    if (!make_directories(dir, other_user ? 0755 : 0700)) {
      return Status::error("cannot create " + cudaagent::quoted(dir));
    }
  }
  state->settings = std::move(settings);
  state->torch = std::move(torch);
  const EvaluationSettings& s = state->settings;
  state->owner_worker = state->make_worker("owner", {state->harness, state->owner_in},
                                           {state->state_root, state->socket_root}, std::nullopt);
  std::vector<std::string> candidate_readable = {state->harness, s.policy_path, state->candidate_in,
                                                 state->state_root, state->socket_root + "/candidate"};
  std::vector<std::string> baseline_readable = {state->harness, state->owner_in, state->state_root,
                                                state->socket_root + "/baseline"};
  std::vector<std::string> candidate_writable, candidate_env, baseline_writable, baseline_env;
  const auto trace_env = [&](const std::string& path) {
    return std::vector<std::string>{"CUDA_INJECTION64_PATH=" + s.kernel_trace_library, "CUDAAGENT_CUPTI_OUT=" + path,
                                    std::string("CUDAAGENT_CUPTI_PROVENANCE=") +
                                        (s.kernel_trace_provenance ? "1" : "0")};
  };
  if (!s.kernel_trace_library.empty() && s.device != "cpu") {
    auto traced = state->prepare_trace(s.kernel_trace_library);
    if (!traced) return traced;
    candidate_readable.push_back(s.kernel_trace_library);
    candidate_writable.push_back(state->trace_path);
    candidate_env = trace_env(state->trace_path);
    if (s.trace_baselines) {
      baseline_readable.push_back(s.kernel_trace_library);
      baseline_writable.push_back(state->baseline_trace_path);
      baseline_env = trace_env(state->baseline_trace_path);
    }
  }
  state->baseline_worker = state->make_worker("baseline", std::move(baseline_readable), std::move(baseline_writable),
                                              std::nullopt, baseline_env);
  state->candidate_worker = state->make_worker("candidate", std::move(candidate_readable),
                                               std::move(candidate_writable), s.candidate_user, candidate_env);
  return std::unique_ptr<Evaluator>(new Evaluator(std::move(state)));
}

void Evaluator::launch_workers() {
  (void)state_->owner_worker->launch();
  (void)state_->candidate_worker->launch();
}

const TorchEnv& Evaluator::torch() const { return state_->torch; }
const std::string& Evaluator::candidate_root() const { return state_->candidate_in; }
const std::string& Evaluator::candidate_trace_path() const { return state_->trace_path; }
bool Evaluator::task_reused() const { return state_->reused; }
const EvaluationSettings& Evaluator::settings() const { return state_->settings; }
const std::string& Evaluator::harness_hash() const { return state_->harness_hash; }
const CpuPlacement& Evaluator::placement() const { return state_->placement; }

bool Evaluator::baseline_attached() const { return state_->baseline.has_value(); }

std::vector<std::uint64_t> Evaluator::fresh_seeds(std::size_t count) {
  std::vector<std::uint64_t> seeds(count);
  for (auto& seed : seeds) {
    seed = std::stoull(random_hex(7), nullptr, 16);  // 56 bits: exact in JSON numbers too
  }
  return seeds;
}

Result<TaskInfo> Evaluator::open_task(const std::string& model_py) {
  State& st = *state_;
  const std::string hash = sha256_hex(model_py);
  st.reused = st.owner && st.task_hash == hash;
  if (st.reused) return st.task;
  st.end_task();
  const auto started = SteadyClock::now();
  const std::string task_dir = st.owner_in + "/" + hash.substr(0, 16);
  st.task_path = task_dir + "/model.py";
  st.state_dir = st.state_root + "/" + hash.substr(0, 16);
  const unsigned mode = st.settings.candidate_user ? 0755 : 0700;
  if (!make_directories(task_dir, mode) || !make_directories(st.state_dir, mode) ||
      !write_file_atomically(st.task_path, model_py)) {
    return Status::error("cannot write the task into " + cudaagent::quoted(task_dir));
  }
  auto spin_ms = call_spin_ms(st.settings.call_wait, st.settings.device);
  if (!spin_ms) return spin_ms.status();
  std::vector<std::string> owner_args = {"--task", st.task_path, "--device", st.settings.device, "--spin-ms",
                                         std::to_string(spin_ms.value())};
  if (st.settings.call_diagnostics) owner_args.push_back("--diagnostics");
  owner_args.insert(owner_args.end(), {"--forwards", std::to_string(st.settings.forwards_per_call),
                                       "--forward-sync", st.settings.forward_sync, "--call-timer",
                                       st.settings.call_timer, "--call-lead-us",
                                       std::to_string(st.settings.call_lead_us)});
  HarnessJob owner_job = st.job("session_owner.py", owner_args);
  owner_job.cpus = st.placement.owner;
  auto session = st.owner_worker->open_session(owner_job);
  if (!session) return session.status();
  st.owner.emplace(std::move(session).value());
  const std::uint64_t seed = fresh_seeds(1).front();
  if (Status sent = st.owner_send(owner_init_command(seed, st.socket_root, st.state_dir, st.settings.atol,
                                                     st.settings.rtol));
      !sent) {
    return sent;
  }
  auto reply = st.owner_reply(st.settings.load_timeout_seconds);
  if (!reply) return Status::error("the task could not be loaded: " + reply.status().message());
  auto parsed = parse_owner_init(reply.value());
  if (!parsed) {
    st.end_task();
    return Status::error("the task could not be loaded: " + parsed.status().message());
  }
  st.task = std::move(parsed).value();
  st.task.task_hash = hash;
  st.task.forwards = forwards_for_task(st.settings.forwards_per_call, st.task.input_bytes, st.task.output_bytes);
  st.task.seconds = since(started);
  st.task_hash = hash;
  return st.task;
}

Result<RunnerStart> Evaluator::State::attach(const std::string& arm, HarnessWorker& worker,
                                             HarnessJob runner_job, std::optional<HarnessSession>& slot) {
  const auto started = SteadyClock::now();
  RunnerStart start;
  const std::string token = random_hex(16);
  if (Status sent = owner_send(owner_attach_command(arm, token, settings.load_timeout_seconds, task.forwards)); !sent) {
    return sent;
  }
  auto session = worker.open_session(runner_job);
  if (!session) {
    cancel_accept(socket_root + "/" + arm + "/" + arm + ".sock");
    (void)owner_reply(30);
    return session.status();
  }
  slot.emplace(std::move(session).value());
  (void)slot->send(token);
  const auto deadline = started + std::chrono::duration<double>(settings.load_timeout_seconds + 30);
  while (true) {
    if (const int signal = stop_requested()) return stopped(signal);
    // The owner's answer first: it comes once the runner connected and said "ready".
    auto message = owner->receive(0.05);
    if (!message) {
      owner.reset();
      return message.status();
    }
    if (message.value().kind == HarnessSession::Message::Kind::kLine) {
      auto attached = parse_owner_attach(message.value().text);
      start.seconds = since(started);
      if (!attached) {
        start.problem = attached.status().message();
        if (slot) {
          if (auto closed = slot->close(5)) start.ended = std::move(closed).value();
        }
        slot.reset();
        return start;
      }
      start.ok = true;
      start.ready_json = attached.value();
      start.sandbox_layers = ready_sandbox_layers(start.ready_json);
      start.pid = ready_pid(start.ready_json);
      return start;
    }
    if (message.value().kind == HarnessSession::Message::Kind::kEnded) {
      owner.reset();
      return Status::error("the session owner ended during an attach");
    }
    if (slot) {
      auto runner = slot->receive(0.0);
      if (!runner) {
        slot.reset();
        return runner.status();
      }
      if (runner.value().kind == HarnessSession::Message::Kind::kEnded) {
        // Died before it connected (an import error, a crash in the constructor): free the owner.
        start.ended = runner.value().result;
        slot.reset();
        cancel_accept(socket_root + "/" + arm + "/" + arm + ".sock");
        (void)owner_reply(30);
        start.problem = "the runner ended before it was ready (" + start.ended->describe() + ")";
        start.seconds = since(started);
        return start;
      }
    }
    if (SteadyClock::now() > deadline) {
      if (slot) slot->abort();
      slot.reset();
      owner->abort();
      owner.reset();
      task_hash.clear();
      start.problem = "the runner did not get ready within " +
                      std::to_string(static_cast<int>(settings.load_timeout_seconds)) + " s";
      start.seconds = since(started);
      return start;
    }
  }
}

Result<RunnerStart> Evaluator::attach_candidate(const std::string& work_dir) {
  State& st = *state_;
  if (!st.owner) return Status::error("no task is open");
  st.end_runner(st.candidate, "candidate");
  if (!st.trace_path.empty()) {
    if (Status emptied = st.empty_trace(st.trace_path, st.settings.candidate_user); !emptied) return emptied;
  }
  if (st.settings.candidate_user) {
    // The runner runs as another, unprivileged user: the build must be readable to it (it holds
    // nothing the candidate did not write itself, plus the pristine glue).
    if (Status opened = open_tree_for_reading(work_dir); !opened) return opened;
  }
  HarnessJob job = st.job("session_runner.py",
                          {"--role", "candidate", "--socket", st.socket_root + "/candidate/candidate.sock",
                           "--state", st.state_dir, "--work", work_dir, "--device", st.settings.device,
                           "--policy", st.settings.policy_path});
  if (st.sandboxed()) job.scrub_dirs = {"/tmp", "/dev/shm"};
  if (st.settings.candidate_user) job.limits.processes = st.settings.candidate_processes;
  job.cpus = st.placement.candidate;
  return st.attach("candidate", *st.candidate_worker, std::move(job), st.candidate);
}

Result<RunnerStart> Evaluator::attach_baseline() {
  State& st = *state_;
  if (!st.owner) return Status::error("no task is open");
  if (st.baseline) return RunnerStart{true, "", std::nullopt, "{}", {}, 0};
  if (!st.baseline_trace_path.empty()) {  // one task's baselines at a time: the file stays small
    if (Status emptied = st.empty_trace(st.baseline_trace_path, std::nullopt); !emptied) return emptied;
  }
  HarnessJob job = st.job("session_runner.py",
                          {"--role", "baseline", "--socket", st.socket_root + "/baseline/baseline.sock",
                           "--state", st.state_dir, "--task", st.task_path, "--device", st.settings.device,
                           "--compile-mode", st.settings.compile_mode});
  job.cpus = st.placement.baseline;
  return st.attach("baseline", *st.baseline_worker, std::move(job), st.baseline);
}

Result<CallBatch> Evaluator::calls(const std::string& arm, const std::string& model,
                                   const std::vector<std::uint64_t>& seeds, double call_timeout_seconds,
                                   bool flush) {
  State& st = *state_;
  if (!st.owner) return Status::error("no task is open");
  const double audit = arm == "candidate" ? st.settings.audit_fraction : 0.0;
  if (Status sent = st.owner_send(owner_calls_command(arm, model, seeds, call_timeout_seconds, flush, audit));
      !sent) {
    return sent;
  }
  // Each call may take its limit, plus the owner's own work around it (inputs, reference, check).
  const double budget = static_cast<double>(seeds.size()) * (call_timeout_seconds + 5) + 30;
  auto reply = st.owner_reply(budget);
  if (!reply) return reply.status();
  return parse_owner_calls(reply.value());
}

Result<RunnerEnd> Evaluator::end_candidate() {
  State& st = *state_;
  RunnerEnd end;
  if (!st.candidate) return Status::error("no candidate runner");
  std::string report;
  if (st.owner) {
    if (st.owner_send(owner_command("detach", "candidate"))) {
      auto reply = st.owner_reply(30);
      if (reply) report = reply.value();
    }
  }
  auto closed = st.candidate->close(10);
  st.candidate.reset();
  if (!closed) return closed.status();
  end.process = std::move(closed).value();
  parse_runner_report(report, end);
  return end;
}

}  // namespace cudaagent
