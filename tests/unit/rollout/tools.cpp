// The tool dispatcher (malformed calls, unknown tools, mistyped arguments are answers, not
// failures) and the shell behind Bash, BashOutput and KillBash, run here without the OS sandbox:
// state that persists, exit codes, cut output, timeouts and exits that restart the shell in the
// same folder, background commands, and the clock that stops while an evaluation runs.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cudaagent/rollout/tools.h"
#include "test_support.h"

using cudaagent::llm::ToolCall;
using cudaagent::rollout::ShellSession;
using cudaagent::rollout::ShellSettings;
using cudaagent::rollout::ToolBox;
using cudaagent::rollout::ToolResult;
using cudaagent::rollout::WorkspaceFiles;
using cudaagent::testing::read_file;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;
namespace fs = std::filesystem;

namespace {

const std::atomic<int> kNoStop{0};

struct Fixture {
  TempDir dir;
  std::string ws, scratch;
  Fixture() {
    ws = dir.file("ws");
    scratch = dir.file("scratch");
    fs::create_directories(ws + "/kernels");
    fs::create_directories(scratch);
    write_file(ws + "/model.py", "x = 1\n");
  }
  ShellSettings shell_settings() const {
    ShellSettings s;
    s.workspace = ws;
    s.scratch = scratch;
    s.env = {"PATH=/usr/bin:/bin", "HOME=/tmp", "LC_ALL=C.UTF-8"};
    s.output_cap_bytes = 2000;
    return s;
  }
};

bool has(const ToolResult& r, const std::string& text) { return r.text.find(text) != std::string::npos; }

ToolCall call(const std::string& name, const std::string& arguments) { return {"c1", name, arguments}; }

}  // namespace

TEST_CASE("the dispatcher answers malformed, unknown and mistyped calls with errors for the model") {
  Fixture f;
  auto files = WorkspaceFiles::open(f.ws, f.ws, {"model.py"});
  REQUIRE(files);
  ShellSession shell(f.shell_settings());
  ToolBox tools(files.value(), shell);
  CHECK(cudaagent::rollout::tool_definitions().size() == 9);
  for (const auto& definition : cudaagent::rollout::tool_definitions()) {
    CAPTURE(definition.name);
    CHECK(cudaagent::testing::is_valid_json(definition.parameters));
  }
  CHECK(has(tools.call(call("", "{broken"), kNoStop), "malformed tool call"));
  CHECK(has(tools.call(call("Read", "{\"file_path\": "), kNoStop), "not a JSON object"));
  CHECK(has(tools.call(call("Read", "[1, 2]"), kNoStop), "not a JSON object"));
  CHECK(has(tools.call(call("Read", "{}"), kNoStop), "missing argument \"file_path\""));
  CHECK(has(tools.call(call("Read", ""), kNoStop), "missing argument \"file_path\""));
  CHECK(has(tools.call(call("Read", R"({"file_path": 7})"), kNoStop), "\"file_path\" must be a string"));
  CHECK(has(tools.call(call("Read", R"({"file_path": "model.py", "limit": "many"})"), kNoStop),
            "must be a number"));
  CHECK_FALSE(
      tools.call(call("Read", R"({"file_path": "model.py", "limit": "1", "note": "extra"})"), kNoStop).error);
  CHECK(has(tools.call(call("MultiEdit", R"({"file_path": "k.cu", "edits": [{"old_string": 1}]})"), kNoStop),
            "edits[0]"));
  CHECK(has(tools.call(call("Grep", R"({"pattern": "x", "-i": "yes"})"), kNoStop), "true or false"));
  const ToolResult unknown = tools.call(call("rm_rf", "{}"), kNoStop);
  CHECK(unknown.error);
  CHECK(has(unknown, "unknown tool 'rm_rf'"));
  CHECK(has(unknown, "Bash, Read, Write"));
  // A well-formed call goes through, and the Write lands in the workspace.
  CHECK_FALSE(
      tools.call(call("Write", R"({"file_path": "kernels/k.cu", "content": "int k;\n"})"), kNoStop).error);
  CHECK(read_file(f.ws + "/kernels/k.cu") == "int k;\n");
  const ToolResult bash =
      tools.call(call("Bash", R"({"command": "cat kernels/k.cu", "description": "show"})"), kNoStop);
  CHECK(bash.text == "int k;\n");
  // Long results are cut in the middle, with a note.
  ToolBox small(files.value(), shell, 100);
  write_file(f.ws + "/big.txt", std::string(5000, 'a'));
  CHECK(has(small.call(call("Read", R"({"file_path": "big.txt"})"), kNoStop), "cut from the middle"));
}

TEST_CASE("the shell keeps its folder and variables, reports exit codes and cuts long output") {
  Fixture f;
  ShellSession shell(f.shell_settings());
  CHECK(shell.run("cd kernels && export GREETING=hello", 0, kNoStop).text == "(no output)");
  CHECK(shell.run("pwd; echo $GREETING", 0, kNoStop).text == f.ws + "/kernels\nhello\n");
  CHECK(shell.cwd() == f.ws + "/kernels");
  const ToolResult failed = shell.run("echo out; echo err >&2; false", 0, kNoStop);
  CHECK(failed.error);
  CHECK(failed.text == "out\nerr\n[exit code 1]");
  CHECK(has(shell.run("if then fi", 0, kNoStop), "syntax error"));  // the shell survives it
  CHECK(shell.run("echo still here", 0, kNoStop).text == "still here\n");
  const ToolResult big = shell.run("head -c 1000000 /dev/zero | tr '\\0' x; echo; echo END", 0, kNoStop);
  CHECK(has(big, "bytes of output cut from the middle"));
  CHECK(has(big, "END"));
  CHECK(big.text.size() < 2200);
  CHECK(shell.run("cat", 0, kNoStop).text == "(no output)");  // stdin is empty, never the shell's input
  CHECK(shell.run("   ", 0, kNoStop).error);
  CHECK(shell.shell_starts() == 1);
}

TEST_CASE("a command past its timeout takes the shell along; the next starts fresh in the same folder") {
  Fixture f;
  ShellSession shell(f.shell_settings());
  (void)shell.run("cd kernels; X=1", 0, kNoStop);
  const ToolResult slow = shell.run("echo started; sleep 30", 0.5, kNoStop);
  CHECK(slow.error);
  CHECK(has(slow, "started"));
  CHECK(has(slow, "timed out after"));
  CHECK(shell.run("pwd; echo \"[$X]\"", 0, kNoStop).text == f.ws + "/kernels\n[]\n");
  CHECK(shell.shell_starts() == 2);
  const ToolResult exited = shell.run("echo bye; exit 3", 0, kNoStop);
  CHECK(has(exited, "bye"));
  CHECK(has(exited, "the shell exited with code 3"));
  CHECK(shell.run("echo back", 0, kNoStop).text == "back\n");
  CHECK(shell.shell_starts() == 3);
}

TEST_CASE("the command clock stops while the evaluator works for the episode") {
  Fixture f;
  ShellSettings settings = f.shell_settings();
  // The evaluator "works" the whole time: the command is never charged and runs to its end.
  const auto begin = std::chrono::steady_clock::now();
  settings.paused_seconds = [begin] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  ShellSession shell(std::move(settings));
  const ToolResult done = shell.run("sleep 1.5; echo finished", 0.5, kNoStop);
  CHECK_FALSE(done.error);
  CHECK(done.text == "finished\n");
}

TEST_CASE("background commands run beside the shell, report new output, and can be killed") {
  Fixture f;
  ShellSession shell(f.shell_settings());
  (void)shell.run("cd kernels", 0, kNoStop);
  const ToolResult started = shell.start_background("pwd; echo one; echo two; sleep 30");
  REQUIRE_FALSE(started.error);
  CHECK(has(started, "bash_1"));
  std::string seen;  // output arrives in pieces: what every call returned, together
  ToolResult out;
  for (int i = 0; i < 200 && seen.find("two") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    out = shell.background_output("bash_1", "");
    seen += out.text;
  }
  CHECK(seen.find(f.ws + "/kernels\n") != std::string::npos);
  CHECK(seen.find("one\n") != std::string::npos);
  CHECK(has(out, "two\n[status: running]"));
  CHECK(has(shell.background_output("bash_1", ""), "(no new output)"));
  CHECK_FALSE(shell.kill_background("bash_1").error);
  CHECK(has(shell.background_output("bash_1", ""), "[status: killed]"));
  CHECK(has(shell.background_output("bash_9", ""), "no background command 'bash_9'"));
  CHECK(shell.kill_background("bash_9").error);

  REQUIRE_FALSE(shell.start_background("echo keep; echo drop; exit 4").error);
  seen.clear();
  for (int i = 0; i < 200 && seen.find("exited") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    seen += shell.background_output("bash_2", "^keep$").text;
  }
  CHECK(seen.find("keep\n") != std::string::npos);
  CHECK(seen.find("drop") == std::string::npos);
  CHECK(seen.find("[status: exited with code 4]") != std::string::npos);
  CHECK(has(shell.background_output("bash_2", "("), "not a valid regular expression"));
}
