// `cudaagent-train tokenize`: a record stage over the tokenizer and chat template, so that what
// serve and the trainer see can be checked from the shell (and compared with another stack).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <CLI/CLI.hpp>

#include <pcre2.h>
#include <utf8proc.h>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/records/record_stage.h"
#include "cudaagent/train/chat_template.h"
#include "cudaagent/train/commands.h"
#include "cudaagent/train/http_server.h"
#include "cudaagent/train/openai_api.h"
#include "cudaagent/train/tokenizer.h"

namespace cudaagent::train {
namespace {

class TokenizeStage : public RecordStage {
 public:
  // `chat` is a template or, when there is none, the reason records with messages are refused.
  TokenizeStage(Tokenizer tokenizer, Result<ChatTemplate> chat) : tokenizer_(std::move(tokenizer)), chat_(std::move(chat)) {}
  std::string_view key() const override { return "tokens"; }

  RecordEdit process(const InputRecord& record) override {
    simdjson::dom::element value;
    std::string out;
    JsonWriter w(out);
    w.begin_object();
    if (record.object["ids"].get(value) == simdjson::SUCCESS) {
      simdjson::dom::array list;
      if (value.get(list) != simdjson::SUCCESS) return RecordEdit::error("'ids' must be a list of token ids");
      std::vector<TokenId> ids;
      for (simdjson::dom::element item : list) {
        std::int64_t id = 0;
        if (item.get(id) != simdjson::SUCCESS) return RecordEdit::error("'ids' must be a list of token ids");
        ids.push_back(static_cast<TokenId>(id));
      }
      w.field("text", tokenizer_.decode(ids));
      w.end_object();
      return RecordEdit::set_key(out);
    }
    std::string text;
    std::string_view given;
    if (record.object["text"].get(given) == simdjson::SUCCESS) {
      text = given;
    } else if (record.object["messages"].error() == simdjson::SUCCESS) {
      if (!chat_) return RecordEdit::error(chat_.status().message());
      auto request = parse_chat_completion_request(record.text);
      if (!request) return RecordEdit::error(request.status().message());
      const ChatTemplate& chat = chat_.value();
      auto rendered = chat.render(request.value().prompt);
      if (!rendered) return RecordEdit::error(rendered.status().message());
      text = std::move(rendered).value();
      w.field("text", text).field("chat_template_sha256", chat.sha256()).field("chat_renderer", chat.renderer());
    } else {
      return RecordEdit::error("the record has none of 'text', 'messages', 'ids'");
    }
    auto ids = tokenizer_.encode(text);
    if (!ids) return RecordEdit::error(ids.status().message());
    w.field("count", static_cast<std::int64_t>(ids.value().size())).key("ids").begin_array();
    for (const TokenId id : ids.value()) w.value(static_cast<std::int64_t>(id));
    w.end_array().field("tokenizer_sha256", tokenizer_.sha256()).end_object();
    return RecordEdit::set_key(out);
  }

 private:
  Tokenizer tokenizer_;
  Result<ChatTemplate> chat_;
};

}  // namespace

CLI::App* add_tokenize_command(CLI::App& app, TokenizeOptions& options, CommonOptions& common) {
  CLI::App* command = app.add_subcommand(
      "tokenize", "Token ids of records' text or chat messages (or the text of their ids), as serve sees them");
  command->add_option("--tokenizer", options.tokenizer, "Directory with tokenizer.json and the chat template")
      ->required()
      ->type_name("DIR");
  command->add_option("--chat-format", options.chat_format, "template or chatml (as for serve)")
      ->capture_default_str()
      ->check(CLI::IsMember({"template", "chatml"}));
  add_common_flags(*command, common);
  return command;
}

Result<StageEnd> run_tokenize(const TokenizeOptions& options, const CommonOptions& common, Session& session) {
  auto tokenizer = Tokenizer::load(options.tokenizer);
  if (!tokenizer) return tokenizer.status();
  // Records with messages need a template; without one, text and ids still work.
  const ChatFormat format = options.chat_format == "chatml" ? ChatFormat::kChatml : ChatFormat::kTemplate;
  auto chat = ChatTemplate::load(options.tokenizer, format);
  if (!chat) session.log.warn(chat.status().message() + "; records with messages will be error records");
  TokenizeStage stage(std::move(tokenizer).value(), std::move(chat));
  return run_record_stage(stage, common, session);
}

std::vector<std::pair<std::string, std::string>> train_dependency_versions() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("torch", CUDAAGENT_TORCH_VERSION);
  char pcre2[64] = {};
  pcre2_config(PCRE2_CONFIG_VERSION, pcre2);
  out.emplace_back("PCRE2", pcre2);
  out.emplace_back("utf8proc", utf8proc_version());
  out.emplace_back("libmicrohttpd", http_server_version().substr(std::string("libmicrohttpd ").size()));
  return out;
}

}  // namespace cudaagent::train
