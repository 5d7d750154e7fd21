// The fallback tool-call protocol for servers without tool parsing: the tools are described in the
// system prompt, and the model writes each call in its text as
//   <tool_call>{"name": "Read", "arguments": {"file_path": "model.py"}}</tool_call>
// (the form Qwen-family chat templates train on). Results go back in a user message as
// <tool_response>...</tool_response> blocks. Pure text functions, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/llm/chat.h"

namespace cudaagent::llm {

// The system-prompt section that lists `tools` (name, description, JSON Schema) and explains the
// call format.
std::string tools_prompt(const std::vector<ToolDefinition>& tools);

// The calls written in `content`, in order. A block whose JSON is malformed, or lacks a string
// "name", is still a call: its name is empty and its arguments hold the raw text, so the episode
// can answer it with an error the model sees. Arguments given as a string are kept as that string;
// as an object, minified. An unterminated <tool_call> at the end (a reply cut by max_tokens) is a
// malformed call too. Ids are "call_<first_index + n>".
std::vector<ToolCall> parse_text_tool_calls(std::string_view content, std::size_t first_index = 0);

// One tool result as the text protocol returns it.
std::string tool_response_text(std::string_view tool_name, std::string_view result);

}  // namespace cudaagent::llm
