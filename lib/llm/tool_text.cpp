// The <tool_call> text protocol. Models put prose, code fences and several calls around the
// blocks; only what sits between the tags is read, so a model that quotes the tag inside a code
// fence of its prose can at worst make a malformed call, which it is then told about.
#include "cudaagent/llm/tool_text.h"

#include <simdjson.h>

namespace cudaagent::llm {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

std::string trim(std::string_view text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const auto end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

ToolCall read_block(std::string_view block, std::size_t index) {
  ToolCall call;
  call.id = "call_" + std::to_string(index);
  const std::string text = trim(block);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  std::string_view name;
  if (parser.parse(text).get(root) || root["name"].get(name)) {
    call.arguments = text;  // malformed: the raw text, name left empty
    return call;
  }
  call.name = std::string(name);
  simdjson::dom::element arguments;
  if (root["arguments"].get(arguments)) {
    call.arguments = "{}";
  } else if (std::string_view string; !arguments.get(string)) {
    call.arguments = std::string(string);
  } else {
    call.arguments = simdjson::minify(arguments);
  }
  return call;
}

}  // namespace

std::string tools_prompt(const std::vector<ToolDefinition>& tools) {
  std::string text =
      "# Tools\n\nYou may call one or more tools to act in your workspace. For each call, write a "
      "JSON object with the tool's name and its arguments between <tool_call> and </tool_call> "
      "tags, like this:\n<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": "
      "\"model.py\"}}\n</tool_call>\nThe results come back in <tool_response> blocks. When you "
      "are finished, answer without any tool call.\n\nThe tools, with the JSON Schema of their "
      "arguments:\n";
  for (const ToolDefinition& tool : tools) {
    std::string line;
    JsonWriter w(line);
    w.begin_object().field("name", tool.name).field("description", tool.description);
    w.key("parameters").raw(tool.parameters).end_object();
    text += line + "\n";
  }
  return text;
}

std::vector<ToolCall> parse_text_tool_calls(std::string_view content, std::size_t first_index) {
  std::vector<ToolCall> calls;
  std::size_t at = content.find(kOpen);
  while (at != std::string_view::npos) {
    const std::size_t body = at + kOpen.size();
    const std::size_t close = content.find(kClose, body);
    const std::size_t next_open = content.find(kOpen, body);
    if (close == std::string_view::npos || (next_open != std::string_view::npos && next_open < close)) {
      // Unterminated: everything up to the next opening tag (or the end) is the call's text.
      const std::size_t end = next_open == std::string_view::npos ? content.size() : next_open;
      ToolCall call = read_block(content.substr(body, end - body), first_index + calls.size());
      if (!call.name.empty()) {  // parsable JSON but no closing tag: still malformed
        call.arguments = trim(content.substr(body, end - body));
        call.name.clear();
      }
      calls.push_back(std::move(call));
      at = next_open;
      continue;
    }
    calls.push_back(read_block(content.substr(body, close - body), first_index + calls.size()));
    at = content.find(kOpen, close + kClose.size());
  }
  return calls;
}

std::string tool_response_text(std::string_view tool_name, std::string_view result) {
  std::string text = "<tool_response>\n";
  if (!tool_name.empty()) text += "[" + std::string(tool_name) + "]\n";
  text += result;
  if (text.back() != '\n') text += '\n';
  text += "</tool_response>";
  return text;
}

}  // namespace cudaagent::llm
