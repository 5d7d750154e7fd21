// Tool overhead of cudaagent-rollout, without model or evaluation time: each file tool called
// through the dispatcher (argument parsing included) on a workspace the size of an episode's, and
// Bash through the persistent shell (in the OS sandbox when it is available). Prints one line per
// tool: calls, median, p90 and max in milliseconds.
// Usage: rollout_tools_bench [CALLS]   (default 200)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cudaagent/base/files.h"
#include "cudaagent/base/session.h"
#include "cudaagent/rollout/tools.h"
#include "cudaagent/sandbox/runner.h"

using namespace cudaagent;
using namespace cudaagent::rollout;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void report(const char* name, std::vector<double> ms, int errors) {
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<std::size_t>(q * static_cast<double>(ms.size())))];
  };
  std::printf("%-10s %5zu calls  median %8.3f ms  p90 %8.3f ms  max %8.3f ms  errors %d\n", name, ms.size(),
              at(0.5), at(0.9), ms.back(), errors);
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  auto root = make_private_dir("/tmp", "cudaagent-tools-bench");
  if (!root) return 1;
  RemovedTree remove(root.value(), false);
  const std::string ws = root.value() + "/workspace", scratch = root.value() + "/scratch";
  (void)make_directories(ws + "/kernels");
  (void)make_directories(scratch);
  // An episode-sized workspace: a task, a few kernels of a few hundred lines, SKILL.md-sized text.
  std::string kernel;
  for (int i = 0; i < 400; ++i)
    kernel += "  acc += x[i * " + std::to_string(i) + "] * w[" + std::to_string(i) + "];  // line\n";
  for (int k = 0; k < 8; ++k)
    (void)write_file_atomically(ws + "/kernels/k" + std::to_string(k) + ".cu", kernel);
  (void)write_file_atomically(ws + "/model.py", std::string(2000, 'm') + "\n");
  (void)write_file_atomically(ws + "/notes.md", std::string(6000, 'n') + "\n");
  auto files = WorkspaceFiles::open(ws, ws, {"model.py"});
  if (!files) return 1;
  Logger log("rollout_tools_bench", stderr);
  SandboxRequest request;
  request.read_only = sandbox_system_paths();
  auto sandbox = choose_sandbox(request, log);
  ShellSettings shell_settings;
  shell_settings.workspace = ws;
  shell_settings.scratch = scratch;
  shell_settings.env = {"PATH=/usr/bin:/bin", "HOME=/tmp", "LC_ALL=C.UTF-8"};
  if (sandbox) shell_settings.wrap = sandbox.value().wrap;
  std::printf("sandbox for Bash: %s\n", sandbox ? sandbox.value().summary.c_str() : "none (probe failed)");
  ShellSession shell(std::move(shell_settings));
  ToolBox tools(files.value(), shell);
  const std::atomic<int> stop{0};
  struct Case {
    const char* name;
    std::vector<std::string> arguments;  // cycled through
  };
  const std::vector<Case> cases = {
      {"Read", {R"({"file_path": "kernels/k3.cu"})"}},
      {"Edit",
       {R"({"file_path": "kernels/k3.cu", "old_string": "w[7];", "new_string": "w[7] ;"})",
        R"({"file_path": "kernels/k3.cu", "old_string": "w[7] ;", "new_string": "w[7];"})"}},
      {"Grep", {R"({"pattern": "w\\[12\\d\\]", "output_mode": "content"})"}},
      {"Glob", {R"({"pattern": "**/*.cu"})"}},
      {"Write", {R"({"file_path": "kernels/new.cu", "content": "__global__ void k() {}\n"})"}},
      {"Bash", {R"({"command": "true"})"}},
  };
  for (const Case& c : cases) {
    std::vector<double> ms;
    int errors = 0;
    for (int i = 0; i < calls; ++i) {
      const std::string& arguments = c.arguments[static_cast<std::size_t>(i) % c.arguments.size()];
      const double start = now_ms();
      const ToolResult result = tools.call({"call", c.name, arguments}, stop);
      ms.push_back(now_ms() - start);
      errors += result.error ? 1 : 0;
    }
    report(c.name, ms, errors);
  }
  return 0;
}
