// The nine tools an episode offers the model — Bash, Read, Write, Edit, MultiEdit, Glob, Grep,
// BashOutput, KillBash — as OpenAI tool definitions (JSON Schema arguments, the names and
// argument names of the Claude Code tool set, so models trained on it need no new habits) and
// one dispatcher from a model's call to a result.
//
// Key design choice: a malformed call (arguments that are not a JSON object, a missing or
// mistyped argument, an unknown tool) is answered like any other call, with an error result the
// model reads; the dispatcher never fails and never throws.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "cudaagent/llm/chat.h"
#include "cudaagent/rollout/shell.h"
#include "cudaagent/rollout/workspace_files.h"

namespace cudaagent::rollout {

// The definitions sent in every request, in a fixed order.
const std::vector<llm::ToolDefinition>& tool_definitions();

class ToolBox {
 public:
  // Neither is owned; both must outlive the box.
  ToolBox(WorkspaceFiles& files, ShellSession& shell, std::size_t result_cap_bytes = 30000)
      : files_(files), shell_(shell), result_cap_(result_cap_bytes) {}

  // Runs one call. Results longer than the cap are cut in the middle, with a note.
  ToolResult call(const llm::ToolCall& call, const std::atomic<int>& stop);

 private:
  ToolResult dispatch(const llm::ToolCall& call, const std::atomic<int>& stop);
  WorkspaceFiles& files_;
  ShellSession& shell_;
  std::size_t result_cap_;
};

}  // namespace cudaagent::rollout
