// Tool definitions and the dispatcher. Arguments are read strictly (types must match the schema)
// but forgivingly about extras: unknown argument names are ignored, since models add fields such
// as "description" to tools that do not take them.
#include "cudaagent/rollout/tools.h"

#include <simdjson.h>

#include <cmath>
#include <optional>

namespace cudaagent::rollout {
namespace {

// One call's arguments: typed lookups that collect the first problem for the model.
class Args {
 public:
  explicit Args(const std::string& text) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
      ok_ = true;  // no arguments at all: every lookup is "missing"
      return;
    }
    simdjson::dom::element root;
    if (parser_.parse(text).get(root) || root.get(object_)) {
      problem_ = "the arguments are not a JSON object: " + text.substr(0, 200);
      return;
    }
    ok_ = true;
    has_object_ = true;
  }
  const std::string& problem() const { return problem_; }
  bool ok() const { return ok_ && problem_.empty(); }

  std::optional<std::string> string(const char* name, bool required) {
    simdjson::dom::element value;
    if (!lookup(name, value)) {
      if (required) missing(name, "a string");
      return std::nullopt;
    }
    std::string_view text;
    if (value.get(text)) return wrong(name, "a string"), std::nullopt;
    return std::string(text);
  }
  std::optional<double> number(const char* name) {
    simdjson::dom::element value;
    if (!lookup(name, value)) return std::nullopt;
    double number = 0;
    std::int64_t integer = 0;
    std::uint64_t unsigned_integer = 0;
    if (!value.get(integer)) return static_cast<double>(integer);
    if (!value.get(unsigned_integer)) return static_cast<double>(unsigned_integer);
    if (!value.get(number) && std::isfinite(number)) return number;
    std::string_view text;  // "200" as a string: models do that
    if (!value.get(text)) {
      try {
        std::size_t used = 0;
        const double parsed = std::stod(std::string(text), &used);
        if (used == text.size() && std::isfinite(parsed)) return parsed;
      } catch (...) {
      }
    }
    return wrong(name, "a number"), std::nullopt;
  }
  std::optional<int> integer(const char* name) {
    auto value = number(name);
    if (!value) return std::nullopt;
    if (*value < -1e9 || *value > 1e9) return wrong(name, "an integer"), std::nullopt;
    return static_cast<int>(std::lround(*value));
  }
  bool flag(const char* name) {
    simdjson::dom::element value;
    if (!lookup(name, value)) return false;
    bool flag = false;
    if (!value.get(flag)) return flag;
    std::string_view text;
    if (!value.get(text) && (text == "true" || text == "false")) return text == "true";
    wrong(name, "true or false");
    return false;
  }
  bool array(const char* name, simdjson::dom::array& out) {
    simdjson::dom::element value;
    if (!lookup(name, value)) return missing(name, "an array"), false;
    if (value.get(out)) return wrong(name, "an array"), false;
    return true;
  }

 private:
  bool lookup(const char* name, simdjson::dom::element& value) {
    if (!has_object_) return false;
    return !object_[name].get(value) && !value.is_null();
  }
  void missing(const char* name, const char* what) {
    if (problem_.empty()) problem_ = std::string("missing argument \"") + name + "\" (" + what + ")";
  }
  void wrong(const char* name, const char* what) {
    if (problem_.empty()) problem_ = std::string("argument \"") + name + "\" must be " + what;
  }
  simdjson::dom::parser parser_;
  simdjson::dom::object object_;
  bool ok_ = false;
  bool has_object_ = false;
  std::string problem_;
};

std::optional<EditSpec> read_edit(simdjson::dom::element item, std::size_t index, std::string& problem) {
  simdjson::dom::object object;
  std::string_view old_string, new_string;
  if (item.get(object) || object["old_string"].get(old_string) || object["new_string"].get(new_string)) {
    problem = "edits[" + std::to_string(index) + "] must be an object with string old_string and new_string";
    return std::nullopt;
  }
  EditSpec edit{std::string(old_string), std::string(new_string), false};
  bool all = false;
  if (!object["replace_all"].get(all)) edit.replace_all = all;
  return edit;
}

llm::ToolDefinition tool(const char* name, const char* description, const char* parameters) {
  return {name, description, parameters};
}

}  // namespace

const std::vector<llm::ToolDefinition>& tool_definitions() {
  static const std::vector<llm::ToolDefinition> kTools = {
      tool(
          "Bash",
          "Run a bash command in your workspace's persistent shell (the working directory, variables "
          "and functions carry over between calls). The sandbox has no network and no GPU; compile, "
          "verify and profile with the workspace's commands (bash utils/compile.sh, python3 -m "
          "utils.verification, python3 -m utils.profiling). Output over 30000 characters is cut in the "
          "middle. Use run_in_background for commands that run long, then BashOutput.",
          R"J({"type":"object","properties":{"command":{"type":"string","description":"The command to run"},)J"
          R"J("timeout":{"type":"number","description":"Milliseconds before the command is stopped (default 120000, at most 600000)"},)J"
          R"J("description":{"type":"string","description":"What the command does, in a few words"},)J"
          R"J("run_in_background":{"type":"boolean","description":"Start it in the background and return at once"}},)J"
          R"J("required":["command"]})J"),
      tool(
          "Read",
          "Read a file of the workspace, with line numbers (cat -n style). By default up to 2000 lines "
          "from the start; give offset (1-based line) and limit for other parts.",
          R"J({"type":"object","properties":{"file_path":{"type":"string","description":"Path of the file, relative to the workspace or absolute"},)J"
          R"J("offset":{"type":"integer","description":"First line to read (1-based)"},)J"
          R"J("limit":{"type":"integer","description":"Number of lines to read"}},"required":["file_path"]})J"),
      tool(
          "Write",
          "Create a file, or replace an existing one (which you must Read first). Folders are created as "
          "needed. model.py, binding.cpp, binding_registry.h, SKILL.md and utils/ are read-only.",
          R"J({"type":"object","properties":{"file_path":{"type":"string","description":"Path of the file"},)J"
          R"J("content":{"type":"string","description":"The whole new content"}},"required":["file_path","content"]})J"),
      tool(
          "Edit",
          "Replace old_string with new_string in a file you have Read. old_string must match exactly "
          "(whitespace included) and occur once, unless replace_all is true.",
          R"J({"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string","description":"The text to replace"},)J"
          R"J("new_string":{"type":"string","description":"The text to put in its place"},)J"
          R"J("replace_all":{"type":"boolean","description":"Replace every occurrence"}},"required":["file_path","old_string","new_string"]})J"),
      tool(
          "MultiEdit",
          "Several Edit operations on one file, applied in order; if any fails, none is applied.",
          R"J({"type":"object","properties":{"file_path":{"type":"string"},"edits":{"type":"array","items":{"type":"object",)J"
          R"J("properties":{"old_string":{"type":"string"},"new_string":{"type":"string"},"replace_all":{"type":"boolean"}},)J"
          R"J("required":["old_string","new_string"]}}},"required":["file_path","edits"]})J"),
      tool(
          "Glob",
          "List workspace files matching a glob pattern ('*' and '?' within a name, '**' across folders, "
          "{a,b} alternatives), e.g. \"kernels/*.cu\" or \"**/*.py\".",
          R"J({"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string","description":"Folder to search in (default: the workspace)"}},)J"
          R"J("required":["pattern"]})J"),
      tool(
          "Grep",
          "Search file contents with a regular expression (PCRE). output_mode \"files_with_matches\" "
          "(default) lists files, \"content\" shows file:line:text, \"count\" counts per file.",
          R"J({"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string","description":"File or folder (default: the workspace)"},)J"
          R"J("glob":{"type":"string","description":"Only files matching this glob, e.g. \"*.cu\""},)J"
          R"J("output_mode":{"type":"string","enum":["files_with_matches","content","count"]},)J"
          R"J("-i":{"type":"boolean","description":"Case-insensitive"},"-C":{"type":"integer","description":"Context lines around each match"},)J"
          R"J("head_limit":{"type":"integer","description":"At most this many output lines"}},"required":["pattern"]})J"),
      tool(
          "BashOutput", "New output of a background command since you last asked, and whether it still runs.",
          R"J({"type":"object","properties":{"bash_id":{"type":"string"},"filter":{"type":"string","description":"Only lines matching this regular expression"}},)J"
          R"J("required":["bash_id"]})J"),
      tool("KillBash", "Stop a background command.",
           R"J({"type":"object","properties":{"shell_id":{"type":"string"}},"required":["shell_id"]})J"),
  };
  return kTools;
}

ToolResult ToolBox::call(const llm::ToolCall& call, const std::atomic<int>& stop) {
  ToolResult result = dispatch(call, stop);
  if (result.text.size() > result_cap_) result.text = cut_middle(result.text, result_cap_);
  return result;
}

// One branch per tool, reading its arguments: the table of the nine tools, kept in one switch-like
// chain so that every tool's arguments are read the same way in one place.
ToolResult ToolBox::dispatch(const llm::ToolCall& call, const std::atomic<int>& stop) {
  if (call.name.empty()) {
    return ToolResult::fail("malformed tool call: expected {\"name\": ..., \"arguments\": {...}}, got: " +
                            call.arguments.substr(0, 300));
  }
  Args args(call.arguments);
  if (!args.ok()) return ToolResult::fail(call.name + ": " + args.problem());
  auto bad = [&](const std::string& problem) { return ToolResult::fail(call.name + ": " + problem); };
  const std::string& name = call.name;
  if (name == "Bash") {
    auto command = args.string("command", true);
    auto timeout_ms = args.number("timeout");
    const bool background = args.flag("run_in_background");
    (void)args.string("description", false);
    if (!args.ok()) return bad(args.problem());
    if (background) return shell_.start_background(*command);
    return shell_.run(*command, timeout_ms ? *timeout_ms / 1000.0 : 0.0, stop);
  }
  if (name == "Read") {
    auto path = args.string("file_path", true);
    auto offset = args.integer("offset");
    auto limit = args.integer("limit");
    if (!args.ok()) return bad(args.problem());
    return files_.read(*path, offset.value_or(0), limit.value_or(0));
  }
  if (name == "Write") {
    auto path = args.string("file_path", true);
    auto content = args.string("content", true);
    if (!args.ok()) return bad(args.problem());
    return files_.write(*path, *content);
  }
  if (name == "Edit") {
    auto path = args.string("file_path", true);
    auto old_string = args.string("old_string", true);
    auto new_string = args.string("new_string", true);
    const bool all = args.flag("replace_all");
    if (!args.ok()) return bad(args.problem());
    return files_.edit(*path, EditSpec{*old_string, *new_string, all});
  }
  if (name == "MultiEdit") {
    auto path = args.string("file_path", true);
    simdjson::dom::array items;
    const bool has_edits = args.array("edits", items);
    if (!args.ok() || !has_edits) return bad(args.problem());
    std::vector<EditSpec> edits;
    std::string problem;
    for (simdjson::dom::element item : items) {
      auto edit = read_edit(item, edits.size(), problem);
      if (!edit) return bad(problem);
      edits.push_back(std::move(*edit));
    }
    return files_.multi_edit(*path, edits);
  }
  if (name == "Glob") {
    auto pattern = args.string("pattern", true);
    auto path = args.string("path", false);
    if (!args.ok()) return bad(args.problem());
    return files_.glob(*pattern, path.value_or(""));
  }
  if (name == "Grep") {
    GrepArgs grep;
    auto pattern = args.string("pattern", true);
    auto path = args.string("path", false);
    auto glob = args.string("glob", false);
    auto mode = args.string("output_mode", false);
    grep.case_insensitive = args.flag("-i");
    auto context = args.integer("-C");
    grep.head_limit = args.integer("head_limit");
    if (!args.ok()) return bad(args.problem());
    grep.pattern = *pattern;
    grep.path = path.value_or("");
    grep.glob = glob.value_or("");
    if (mode) grep.output_mode = *mode;
    grep.context = context.value_or(0);
    return files_.grep(grep);
  }
  if (name == "BashOutput") {
    auto id = args.string("bash_id", true);
    auto filter = args.string("filter", false);
    if (!args.ok()) return bad(args.problem());
    return shell_.background_output(*id, filter.value_or(""));
  }
  if (name == "KillBash") {
    auto id = args.string("shell_id", true);
    if (!args.ok()) return bad(args.problem());
    return shell_.kill_background(*id);
  }
  std::string known;
  for (const auto& definition : tool_definitions()) known += (known.empty() ? "" : ", ") + definition.name;
  return ToolResult::fail("unknown tool '" + name.substr(0, 100) + "'; the tools are: " + known);
}

}  // namespace cudaagent::rollout
