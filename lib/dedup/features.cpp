// The AST helper process: a Subprocess (run_process's child set-up: its own process group, reset
// signals, closed descriptors, rlimits, death with its parent) that stays alive, one request and
// one answer per line. The helper's stderr is kept in memory, and its last line explains a death.
#include "cudaagent/dedup/features.h"

#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/base/session.h"
#include "cudaagent/sandbox/subprocess.h"
#include "cudaagent/sandbox/torch_env.h"

extern char** environ;

namespace cudaagent {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The helper holds one parsed module at a time; a hostile source may ask for much more.
constexpr std::uint64_t kAddressSpaceBytes = std::uint64_t{8} << 30;
constexpr std::uint64_t kStderrBytes = std::uint64_t{1} << 20;
constexpr double kStartSeconds = 30.0;
// A helper that closed its output is usually exiting: this long for its own exit code.
constexpr double kExitGraceSeconds = 0.5;

double seconds_left(SteadyClock::time_point deadline) {
  return std::max(0.0, std::chrono::duration<double>(deadline - SteadyClock::now()).count());
}

// The last line of a text, without trailing blanks.
std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (const auto cut = text.rfind('\n'); cut != std::string::npos) text.erase(0, cut + 1);
  return text;
}

}  // namespace

struct AstTokenizer::State {
  std::string python;
  std::optional<Subprocess> helper;
  double timeout_seconds = 60.0;
  bool failed = false;
  simdjson::dom::parser parser;

  // Why the helper is gone or misbehaving, for messages: how it ended, its last stderr line. The
  // helper is finished (killed if it does not exit by itself) and every later call fails.
  std::string autopsy(const std::string& what) {
    std::string text = what;
    failed = true;
    if (!helper) return text;
    if (const auto ended = helper->finish(kExitGraceSeconds)) text += " (" + ended->describe() + ")";
    if (const std::string err = last_line(helper->stderr_tail(4096)); !err.empty()) {
      text += ": " + err;
    }
    helper.reset();
    return text;
  }

  // The next line of the helper's output (without the '\n'), waiting until `deadline`.
  Result<std::string> receive_line(SteadyClock::time_point deadline, std::size_t cap) {
    auto line = helper->receive_line(seconds_left(deadline), cap);
    if (!line) return Status::error(autopsy(line.status().message()));
    switch (line.value().kind) {
      case Subprocess::Line::Kind::kLine: return std::move(line.value().text);
      case Subprocess::Line::Kind::kClosed: return Status::error(autopsy("the AST helper ended"));
      case Subprocess::Line::Kind::kTooLong:
        return Status::error(
            autopsy("the AST helper's answer exceeds " + std::to_string(cap) + " bytes"));
      case Subprocess::Line::Kind::kTimeout: break;
    }
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", timeout_seconds);
    return Status::error(autopsy(std::string("the AST helper did not answer within ") + limit + " s"));
  }
};

AstTokenizer::AstTokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
AstTokenizer::AstTokenizer(AstTokenizer&&) noexcept = default;
AstTokenizer& AstTokenizer::operator=(AstTokenizer&&) noexcept = default;
AstTokenizer::~AstTokenizer() = default;

const std::string& AstTokenizer::python() const { return state_->python; }

Result<AstTokenizer> AstTokenizer::start(const std::string& python, const std::string& script,
                                         double timeout_seconds) {
  auto state = std::make_unique<State>();
  state->python = python;
  state->timeout_seconds = timeout_seconds;

  ProcessSpec spec;
  spec.argv = {python, "-I", script};
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    spec.env.emplace_back(*entry);
  }
  spec.limits.address_space_bytes = kAddressSpaceBytes;
  spec.limits.file_size_bytes = kStderrBytes;  // bounds the kept stderr
  auto spawned = Subprocess::spawn_keeping_stderr(spec);
  if (!spawned) return spawned.status();
  state->helper.emplace(std::move(spawned).value());

  // Start-up gets at least kStartSeconds: an interpreter on a loaded node or a network
  // filesystem can take seconds to import, and that says nothing about the parses to come.
  const auto deadline =
      SteadyClock::now() +
      std::chrono::duration_cast<SteadyClock::duration>(
          std::chrono::duration<double>(std::max(timeout_seconds, kStartSeconds)));
  auto line = state->receive_line(deadline, 4096);
  if (!line) {
    return Status::error(cudaagent::quoted(python) +
                         " cannot run the AST helper: " + line.status().message());
  }
  simdjson::dom::element answer;
  std::string_view version;
  if (state->parser.parse(line.value()).get(answer) || answer["version"].get(version)) {
    return Status::error(
        cudaagent::quoted(python) + " cannot run the AST helper: " +
        state->autopsy("it announced " + cudaagent::quoted(line.value().substr(0, 200))));
  }
  if (version != kAstTokensVersion) {
    return Status::error(cudaagent::quoted(script) + " speaks " + cudaagent::quoted(version) +
                         ", expected " + cudaagent::quoted(kAstTokensVersion) +
                         " (a share directory from another version?)");
  }
  return AstTokenizer(std::move(state));
}

Result<ParsedSource> AstTokenizer::parse(std::string_view source) {
  State& state = *state_;
  if (state.failed) return Status::error("the AST helper has already failed");
  std::string request;
  request.reserve(source.size() + 16);
  append_json_string(request, source);
  request.push_back('\n');
  const auto deadline =
      SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                               std::chrono::duration<double>(state.timeout_seconds));
  if (Status sent = state.helper->send(request, state.timeout_seconds); !sent) {
    return Status::error(state.autopsy("the AST helper did not take the request: " + sent.message()));
  }
  // Tokens are at most a few times longer than their text ("a+b" is "BinOp Name Add Name").
  auto line = state.receive_line(deadline, 16 * source.size() + (std::size_t{1} << 20));
  if (!line) return line.status();
  simdjson::dom::object answer;
  ParsedSource parsed;
  std::string_view text;
  if (state.parser.parse(line.value()).get(answer)) {
    return Status::error(
        state.autopsy("the AST helper answered " + cudaagent::quoted(line.value().substr(0, 200))));
  }
  std::string_view ops;
  if (!answer["tokens"].get(text) && !answer["ops"].get(ops)) {
    parsed.parsed = true;
    parsed.tokens = std::string(text);
    parsed.ops = std::string(ops);
  } else if (!answer["error"].get(text)) {
    parsed.error = std::string(text);
  } else {
    return Status::error(
        state.autopsy("the AST helper answered " + cudaagent::quoted(line.value().substr(0, 200))));
  }
  return parsed;
}

std::vector<std::optional<Result<ParsedSource>>> parse_sources(
    const std::string& python, const std::string& script,
    const std::vector<std::string_view>& sources, int helpers, std::uint64_t& restarts,
    const std::atomic<int>* stop) {
  std::vector<std::optional<Result<ParsedSource>>> answers(sources.size());
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> failures{0};
  // Each thread owns one helper; a source goes to whichever thread is free, so a slow task
  // holds up one helper, not the others.
  auto work = [&] {
    auto helper = AstTokenizer::start(python, script);
    while (helper && (stop == nullptr || stop->load() == 0)) {
      const std::size_t i = next.fetch_add(1);
      if (i >= sources.size()) break;
      auto answer = helper.value().parse(sources[i]);
      const bool failed = !answer;
      answers[i].emplace(std::move(answer));
      if (failed) {
        ++failures;
        helper = AstTokenizer::start(python, script);
      }
    }
  };
  const std::size_t threads = std::min<std::size_t>(std::max(helpers, 1), sources.size());
  std::vector<std::thread> workers;
  for (std::size_t i = 1; i < threads; ++i) workers.emplace_back(work);
  if (threads > 0) work();
  for (std::thread& worker : workers) worker.join();
  restarts += failures.load();
  return answers;
}

Result<AstTokenizer> start_ast_tokenizer(const std::string& requested) {
  const std::string script = share_dir() + "/harness/ast_features.py";
  std::string reasons;
  for (const std::string& python : python_candidates(requested)) {
    auto started = AstTokenizer::start(python, script);
    if (started) return started;
    reasons += (reasons.empty() ? "" : "; ") + started.status().message();
  }
  return Status::error("no Python can run the AST helper: " + reasons);
}

}  // namespace cudaagent
