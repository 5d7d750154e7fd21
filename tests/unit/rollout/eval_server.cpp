// The evaluation socket with a stand-in evaluator (the shims' protocol: one word in, "exit N" and
// text out), the evaluation budget, unknown requests; the replay script format; and the text the
// verification shim prints for a verify value.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "cudaagent/rollout/eval_server.h"
#include "cudaagent/rollout/local_evaluator.h"
#include "cudaagent/rollout/policy.h"
#include "test_support.h"

using namespace cudaagent::rollout;
using cudaagent::testing::TempDir;

namespace {

class FakeEvaluator final : public EpisodeEvaluator {
 public:
  EvalReply compile(const EvalRequest& r) override { return {"built " + r.task_id + "\n", 0, "compiled"}; }
  EvalReply verify(const EvalRequest& r) override {
    return {"verified " + r.workspace + "\n", 1, "FAIL_INCORRECT"};
  }
  EvalReply profile(const EvalRequest&) override { return {"timed\n", 0, "PASS"}; }
  FinalScore final_score(const EvalRequest&) override { return {}; }
};

// What a shim does: connect, send one line, read everything.
std::string ask(const std::string& socket_path, const std::string& line) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  std::string out;
  char buffer[256];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;)
    out.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

}  // namespace

TEST_CASE("the evaluation socket answers the shims' three words, within the episode's budget") {
  TempDir dir;
  FakeEvaluator evaluator;
  const std::string socket_path = dir.file("sock");
  auto server = EvalServer::start(socket_path, evaluator, {"task-1", "model", "/ws", "ep"}, 3);
  REQUIRE(server);
  server.value()->set_turn(4);
  CHECK(ask(socket_path, "compile\n") == "exit 0\nbuilt task-1\n");
  CHECK(ask(socket_path, "verify --extra args\n").rfind("exit 2\nunknown evaluation request", 0) == 0);
  CHECK(ask(socket_path, "verify\n") == "exit 1\nverified /ws\n");
  CHECK(ask(socket_path, "profile\r\n") == "exit 0\ntimed\n");
  CHECK(ask(socket_path, "profile\n").rfind("exit 3\nthis episode has used all 3", 0) == 0);
  const auto calls = server.value()->calls();
  REQUIRE(calls.size() == 5);
  CHECK(calls[0].op == "compile");
  CHECK(calls[0].turn == 4);
  CHECK(calls[2].verdict == "FAIL_INCORRECT");
  CHECK(calls[4].verdict == "budget");
  CHECK(server.value()->busy_seconds() >= 0.0);
  server.value().reset();
  CHECK_FALSE(std::filesystem::exists(socket_path));  // removed with the server
}

TEST_CASE("replay scripts give one reply per turn and end the episode when they run out") {
  auto script = parse_replay_script(
      "{\"content\": \"look\", \"tool_calls\": [{\"name\": \"Read\", \"arguments\": {\"file_path\": "
      "\"m.py\"}}]}\n"
      "\n"
      "{\"tool_calls\": [{\"name\": \"Bash\", \"arguments\": \"{not json\"}, {\"name\": \"Glob\"}]}\n"
      "{\"content\": \"done\"}\n",
      "s.jsonl");
  REQUIRE(script);
  REQUIRE(script.value().replies.size() == 3);
  CHECK(script.value().replies[0].tool_calls[0].arguments == R"({"file_path":"m.py"})");
  CHECK(script.value().replies[1].tool_calls[0].arguments == "{not json");  // kept malformed on purpose
  CHECK(script.value().replies[1].tool_calls[1].arguments == "{}");
  CHECK(script.value().replies[2].finish_reason == "stop");
  ReplayPolicy policy(std::make_shared<const ReplayScript>(script.value()));
  cudaagent::llm::ChatRequest request;
  request.messages.push_back({"user", "go", {}, {}, {}, {}});
  std::atomic<int> stop{0};
  cudaagent::llm::ChatFailure failure{};
  CHECK(policy.next(request, stop, failure).value().reply.content == "look");
  for (int i = 0; i < 3; ++i) request.messages.push_back({"assistant", "", {}, {}, {}, {}});
  CHECK(policy.next(request, stop, failure).value().reply.finish_reason == "script_end");
  stop = 15;
  CHECK_FALSE(policy.next(request, stop, failure));
  CHECK(failure == cudaagent::llm::ChatFailure::kStopped);

  CHECK(parse_replay_script("not json\n", "bad").status().message().find("line 1") != std::string::npos);
  CHECK_FALSE(parse_replay_script("{\"tool_calls\": [{\"arguments\": {}}]}\n", "bad"));
  CHECK_FALSE(parse_replay_script("\n\n", "empty"));
}

TEST_CASE("the verification shim's text explains a failure: compiler errors, findings, checks") {
  const std::string json = R"({"verdict":"FAIL_COMPILE","reason":"kernels/a.cu:3: error: x",
    "build":{"ok":false,"diagnostics":"kernels/a.cu:3: error: x undeclared","log_tail":"full log"},
    "policy":{"findings":[{"rule":"unexpected-file","path":"test.py","detail":"Python file"}],"forbidden_ops":{"aten::add":2}},
    "checks":[{"index":0,"match":true},{"index":1,"match":false,"max_abs_error":3}],
    "candidate_stderr":"Traceback"})";
  const std::string text = verify_report(json);
  CHECK(text.rfind("verification: FAIL_COMPILE (kernels/a.cu:3: error: x)\n", 0) == 0);
  CHECK(text.find("x undeclared") != std::string::npos);
  CHECK(text.find("full log") != std::string::npos);
  CHECK(text.find("unexpected-file: test.py: Python file") != std::string::npos);
  CHECK(text.find("aten::add") != std::string::npos);
  CHECK(text.find("\"max_abs_error\":3") != std::string::npos);
  CHECK(text.find("\"index\":0") == std::string::npos);  // passing checks are not listed
  CHECK(text.find("Traceback") != std::string::npos);
  CHECK(verify_report("garbage").find("could not be read") != std::string::npos);
}
