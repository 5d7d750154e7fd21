// The chat template, rendered natively rather than by a Jinja engine. A checkpoint's template text
// is recognised by its SHA-256: a text whose rendering we reproduce byte for byte (checked against
// Hugging Face's apply_chat_template in the tests) renders with no further question. Any other
// text is refused unless the caller asks for our ChatML dialect explicitly (ChatFormat::kChatml),
// because a prompt that differs from the template the model was trained with by one newline is a
// silent train/serve mismatch. Either way the template's fingerprint and the renderer's name are
// reported, so trajectories can record which template produced their prompts.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent::train {

struct ToolCall {
  std::string id;         // the call's id (OpenAI's tool_calls[].id); not rendered by ChatML
  std::string name;
  // The arguments: as given when `arguments_is_string` (OpenAI's wire form, a JSON text in a
  // string, rendered verbatim); else JSON text of an object, rendered as Python's json.dumps.
  std::string arguments;
  bool arguments_is_string = true;
};

struct ChatMessage {
  std::string role;                    // system, user, assistant, tool (others render nothing)
  std::optional<std::string> content;  // none for JSON null
  std::vector<ToolCall> tool_calls;    // assistant messages
  std::string tool_call_id;            // tool messages; not rendered by ChatML
};

struct ChatPrompt {
  std::vector<ChatMessage> messages;
  std::vector<std::string> tools;  // each tool definition as JSON text, in order
  bool add_generation_prompt = true;
};

enum class ChatFormat {
  kTemplate,  // the checkpoint's template, which must be one we reproduce exactly
  kChatml,    // our ChatML dialect with tools, whatever the checkpoint's template says
};

class ChatTemplate {
 public:
  // The template for `text`. A Status (saying how to force ChatML) when `format` is kTemplate and
  // the text is not one we reproduce.
  static Result<ChatTemplate> from_text(std::string_view text, ChatFormat format);
  // The template a checkpoint (or tokenizer) directory carries: chat_template.jinja, else the
  // `chat_template` of tokenizer_config.json (a string, or the entry named "default" of a list).
  // A directory with neither has no template: an error for kTemplate, ChatML for kChatml.
  static Result<ChatTemplate> load(const std::string& dir, ChatFormat format);

  // The prompt text. A Status for a conversation the template cannot render (no messages, a
  // user message without content, a tool definition that is not JSON, ...). Thread-safe.
  Result<std::string> render(const ChatPrompt& prompt) const;

  // SHA-256 (hex) of the template text the checkpoint carries; empty when it carries none.
  const std::string& sha256() const { return sha256_; }
  // The renderer that produces prompts: "chatml-tools-v1".
  const std::string& renderer() const { return renderer_; }
  // Whether the checkpoint's text is one whose rendering we verified byte for byte.
  bool verified() const { return verified_; }

 private:
  std::string sha256_;
  std::string renderer_;
  bool verified_ = false;
};

}  // namespace cudaagent::train
