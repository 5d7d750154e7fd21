// The ChatML dialect with tools, written as the statements of the Jinja template it reproduces
// (tests/fixtures/train/tokenizer/tokenizer_config.json), branch for branch, so that the two can be
// read side by side. Recognised template texts are listed by SHA-256 in kVerifiedTemplates.
#include "cudaagent/train/chat_template.h"

#include <simdjson.h>

#include <filesystem>

#include "cudaagent/base/files.h"
#include "cudaagent/base/session.h"
#include "cudaagent/base/sha256.h"
#include "cudaagent/train/python_json.h"

namespace cudaagent::train {
namespace {

constexpr std::string_view kChatmlRenderer = "chatml-tools-v1";

// Template texts whose Hugging Face rendering kChatmlRenderer reproduces byte for byte (the
// parity test renders tests/fixtures/train/chat_cases.json with each). Add a text here only with
// such a test.
struct VerifiedTemplate {
  std::string_view sha256;
  std::string_view origin;
};
constexpr VerifiedTemplate kVerifiedTemplates[] = {
    {"0c6fb4c5c39f24378ea74eef409d6ccc667fbb5a421ba3039a0534030261b435",
     "cudaagent ChatML with tools (tests/gpu/train/make_fixtures.py)"},
};

Result<std::string> tojson(const std::string& json_text, std::string_view what) {
  auto dumped = python_json_dumps(json_text);
  if (!dumped) return dumped.status().with_context(std::string(what));
  return dumped;
}

Status need_content(const ChatMessage& message, std::size_t index) {
  if (message.content) return Status::ok();
  return Status::error("message " + std::to_string(index) + " (" + message.role + ") has no content");
}

}  // namespace

Result<ChatTemplate> ChatTemplate::from_text(std::string_view text, ChatFormat format) {
  ChatTemplate chat;
  chat.renderer_ = kChatmlRenderer;
  chat.sha256_ = text.empty() ? "" : sha256_hex(text);
  for (const auto& known : kVerifiedTemplates) {
    if (known.sha256 == chat.sha256_) chat.verified_ = true;
  }
  if (!chat.verified_ && format == ChatFormat::kTemplate) {
    return Status::error(
        text.empty() ? std::string("the checkpoint has no chat template")
                     : "chat template " + chat.sha256_ + " is not one cudaagent reproduces exactly");
  }
  return chat;
}

Result<ChatTemplate> ChatTemplate::load(const std::string& dir, ChatFormat format) {
  std::string text;
  const std::string jinja = dir + "/chat_template.jinja";
  std::error_code ignored;
  if (std::filesystem::is_regular_file(jinja, ignored)) {
    if (!read_whole_file(jinja, text)) return Status::error("cannot read " + cudaagent::quoted(jinja));
  } else {
    const std::string config = dir + "/tokenizer_config.json";
    simdjson::dom::parser parser;
    simdjson::dom::element root, entry;
    if (std::filesystem::is_regular_file(config, ignored)) {
      if (auto error = parser.load(config).get(root); error) {
        return Status::error(cudaagent::quoted(config) + ": " + simdjson::error_message(error));
      }
      std::string_view found;
      simdjson::dom::array list;
      if (root["chat_template"].get(found) == simdjson::SUCCESS) {
        text = found;
      } else if (root["chat_template"].get(list) == simdjson::SUCCESS) {
        for (simdjson::dom::element item : list) {
          std::string_view name, body;
          if (item["name"].get(name) == simdjson::SUCCESS && name == "default" &&
              item["template"].get(body) == simdjson::SUCCESS) {
            text = body;
          }
        }
      }
    }
  }
  auto chat = from_text(text, format);
  if (!chat) {
    return chat.status().with_context(cudaagent::quoted(dir)).with_context(
        "chat template (pass --chat-format chatml to render ChatML with tools regardless)");
  }
  return chat;
}

Result<std::string> ChatTemplate::render(const ChatPrompt& prompt) const {
  const auto& messages = prompt.messages;
  if (messages.empty()) return Status::error("the conversation has no messages");
  std::string out;
  const bool first_is_system = messages[0].role == "system";
  if (!prompt.tools.empty()) {
    out += "<|im_start|>system\n";
    if (first_is_system) {
      if (Status s = need_content(messages[0], 0); !s) return s;
      out += *messages[0].content;
    } else {
      out += "You are a helpful assistant.";
    }
    out += "\n\n# Tools\n\nYou may call one or more functions. Function signatures are inside "
           "<tools></tools>:\n<tools>";
    for (const std::string& tool : prompt.tools) {
      auto dumped = tojson(tool, "tool definition");
      if (!dumped) return dumped.status();
      out += "\n" + dumped.value();
    }
    out += "\n</tools>\n\nFor each call, return a JSON object with the function name and arguments "
           "inside <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function-name>, "
           "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
  } else if (first_is_system) {
    if (Status s = need_content(messages[0], 0); !s) return s;
    out += "<|im_start|>system\n" + *messages[0].content + "<|im_end|>\n";
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    const std::string& role = message.role;
    if (role == "user" || (role == "system" && i != 0) ||
        (role == "assistant" && message.tool_calls.empty())) {
      if (Status s = need_content(message, i); !s) return s;
      out += "<|im_start|>" + role + "\n" + *message.content + "<|im_end|>\n";
    } else if (role == "assistant") {
      out += "<|im_start|>assistant";
      if (message.content && !message.content->empty()) out += "\n" + *message.content;
      for (const ToolCall& call : message.tool_calls) {
        out += "\n<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": ";
        if (call.arguments_is_string) {
          out += call.arguments;
        } else {
          auto dumped = tojson(call.arguments, "tool call arguments");
          if (!dumped) return dumped.status();
          out += dumped.value();
        }
        out += "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (role == "tool") {
      if (Status s = need_content(message, i); !s) return s;
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + *message.content + "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
    // Any other role renders nothing, as in the template.
  }
  if (prompt.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace cudaagent::train
