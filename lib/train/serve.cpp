// serve: options, the routes over the engine, and the main loop. SIGHUP is blocked in every thread
// (the mask is set before the engine and server threads start, and they inherit it) and taken
// synchronously by the main loop with sigtimedwait, so a reload never runs inside a signal handler
// and needs no process-wide state.
#include "cudaagent/train/serve.h"

#include <CLI/CLI.hpp>
#include <pthread.h>
#include <signal.h>

#include <ctime>
#include <filesystem>
#include <random>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/train/openai_api.h"

namespace cudaagent::train {
namespace {

HttpServerResponse json_response(int status, std::string body) { return {status, std::move(body), "application/json"}; }
HttpServerResponse error_response(int status, std::string_view message) {
  return json_response(status, write_error(status, message));
}

// Restores the caller's signal mask when serving ends.
class BlockedSignal {
 public:
  explicit BlockedSignal(int signal_number) {
    sigemptyset(&set_);
    sigaddset(&set_, signal_number);
    pthread_sigmask(SIG_BLOCK, &set_, &previous_);
  }
  ~BlockedSignal() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  BlockedSignal(const BlockedSignal&) = delete;
  BlockedSignal& operator=(const BlockedSignal&) = delete;
  // The signal, if it arrives within `seconds`.
  bool wait(double seconds) const {
    timespec timeout{static_cast<time_t>(seconds), static_cast<long>((seconds - static_cast<double>(static_cast<time_t>(seconds))) * 1e9)};
    return sigtimedwait(&set_, nullptr, &timeout) > 0;
  }

 private:
  sigset_t set_{}, previous_{};
};

std::string default_model_name(const std::string& checkpoint) {
  std::filesystem::path path(checkpoint);
  if (path.filename().empty()) path = path.parent_path();
  return path.filename().string();
}

}  // namespace

CLI::App* add_serve_command(CLI::App& app, ServeOptions& options, CommonOptions& common) {
  CLI::App* command = app.add_subcommand("serve", "Serve a checkpoint over an OpenAI-compatible HTTP API");
  command->add_option("checkpoint", options.engine.checkpoint,
                      "Checkpoint directory: config.json, *.safetensors, tokenizer.json")
      ->required()
      ->type_name("DIR");
  command->add_option("--tokenizer", options.engine.tokenizer,
                      "Directory with tokenizer.json and the chat template (default: the checkpoint)")
      ->type_name("DIR");
  command->add_option("--device", options.engine.device, "Torch device: cpu, cuda, cuda:N")->capture_default_str();
  command->add_option("--dtype", options.engine.dtype, "float32, bfloat16, float16, or auto (the checkpoint's)")
      ->capture_default_str();
  command->add_option("--host", options.host, "Address to listen on (an IPv4 or IPv6 literal)")->capture_default_str();
  command->add_option("--port", options.port, "Port to listen on; 0 picks a free one")->capture_default_str();
  command->add_option("--served-model-name", options.served_model_name,
                      "Model name clients use (default: the checkpoint directory's name)");
  command->add_option("--max-num-seqs", options.engine.max_batch, "Sequences decoded together")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  command->add_option("--max-model-len", options.engine.max_model_len,
                      "Tokens per sequence, prompt and completion (0: the config's, at most 32768)")
      ->capture_default_str();
  command->add_option("--chat-format", options.chat_format,
                      "template: the checkpoint's chat template, which must be one cudaagent reproduces; "
                      "chatml: cudaagent's ChatML with tools whatever the checkpoint says")
      ->capture_default_str()
      ->check(CLI::IsMember({"template", "chatml"}));
  command->add_flag("-q,--quiet", common.quiet, "No messages on stderr but errors");
  return command;
}

OpenAiRoutes::OpenAiRoutes(Engine& engine, std::string served_model_name)
    : engine_(engine), name_(std::move(served_model_name)), id_base_(std::random_device{}()) {}

std::string OpenAiRoutes::next_id() {
  char text[40];
  std::snprintf(text, sizeof text, "chatcmpl-%08llx%08llx", static_cast<unsigned long long>(id_base_ & 0xffffffffu),
                static_cast<unsigned long long>(id_counter_.fetch_add(1)));
  return text;
}

HttpServerResponse OpenAiRoutes::handle(const HttpServerRequest& request) {
  const bool get = request.method == "GET", post = request.method == "POST";
  if (request.path == "/health" && get) return json_response(200, "{}");
  if (request.path == "/v1/models" && get) return models();
  if (request.path == "/v1/chat/completions" && post) return chat_completions(request.body);
  if (request.path == "/tokenize" && post) return tokenize(request.body);
  if (request.path == "/v1/reload" && post) return reload(request.body);
  return error_response(404, "no route " + request.method + " " + request.path);
}

HttpServerResponse OpenAiRoutes::models() {
  const EngineInfo info = engine_.info();
  const ChatTemplate& chat = engine_.chat_template();
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("object", "list").key("data").begin_array().begin_object();
  w.field("id", name_).field("object", "model").field("created", static_cast<std::int64_t>(std::time(nullptr)));
  w.field("owned_by", "cudaagent").field("root", info.checkpoint);
  w.field("max_model_len", info.max_model_len).field("max_num_seqs", info.max_batch);
  w.field("weights_version", static_cast<std::int64_t>(info.weights_version));
  w.field("device", info.device).field("dtype", info.dtype);
  w.field("tokenizer_sha256", engine_.tokenizer().sha256());
  w.field("chat_template_sha256", chat.sha256()).field("chat_renderer", chat.renderer());
  w.field("chat_template_verified", chat.verified());
  w.key("eos_token_ids").begin_array();
  for (const TokenId id : info.eos_token_ids) w.value(static_cast<std::int64_t>(id));
  w.end_array().end_object().end_array().end_object();
  return json_response(200, out);
}

HttpServerResponse OpenAiRoutes::chat_completions(const std::string& body) {
  auto parsed = parse_chat_completion_request(body);
  if (!parsed) return error_response(400, parsed.status().message());
  ChatCompletionRequest& request = parsed.value();
  if (!request.model.empty() && request.model != name_) {
    return error_response(404, "The model `" + request.model + "` does not exist.");
  }
  request.model = name_;
  std::vector<TokenId> prompt;
  if (request.prompt_token_ids) {
    prompt = *request.prompt_token_ids;
  } else {
    auto rendered = engine_.chat_template().render(request.prompt);
    if (!rendered) return error_response(400, rendered.status().message());
    auto ids = engine_.tokenizer().encode(rendered.value());
    if (!ids) return error_response(400, ids.status().message());
    prompt = std::move(ids).value();
  }
  auto done = engine_.generate(GenerationRequest{std::move(prompt), request.sampling});
  if (!done) return error_response(400, done.status().message());
  return json_response(200, write_chat_completion(request, done.value(), engine_.tokenizer(), next_id(),
                                                  static_cast<std::int64_t>(std::time(nullptr))));
}

HttpServerResponse OpenAiRoutes::tokenize(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body).get(root) != simdjson::SUCCESS) return error_response(400, "the body is not JSON");
  std::string text;
  std::string_view prompt;
  if (root["prompt"].get(prompt) == simdjson::SUCCESS) {
    text = prompt;
  } else {
    auto request = parse_chat_completion_request(body);
    if (!request) return error_response(400, request.status().message());
    auto rendered = engine_.chat_template().render(request.value().prompt);
    if (!rendered) return error_response(400, rendered.status().message());
    text = std::move(rendered).value();
  }
  auto ids = engine_.tokenizer().encode(text);
  if (!ids) return error_response(400, ids.status().message());
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("count", static_cast<std::int64_t>(ids.value().size()));
  w.field("max_model_len", engine_.info().max_model_len).key("tokens").begin_array();
  for (const TokenId id : ids.value()) w.value(static_cast<std::int64_t>(id));
  w.end_array().end_object();
  return json_response(200, out);
}

HttpServerResponse OpenAiRoutes::reload(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  std::string_view checkpoint;
  if (!body.empty()) {
    if (parser.parse(body).get(root) != simdjson::SUCCESS || !root.is_object()) {
      return error_response(400, "the body must be a JSON object");
    }
    if (auto field = root["checkpoint"]; field.error() == simdjson::SUCCESS && field.get(checkpoint) != simdjson::SUCCESS) {
      return error_response(400, "'checkpoint' must be a string");
    }
  }
  auto version = engine_.reload(std::string(checkpoint));
  if (!version) return error_response(400, version.status().message());
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("weights_version", static_cast<std::int64_t>(version.value()));
  w.field("checkpoint", engine_.info().checkpoint).end_object();
  return json_response(200, out);
}

Result<StageEnd> run_serve(ServeOptions& options, Session& session) {
  const BlockedSignal hangup(SIGHUP);  // before any thread starts: they all inherit the block
  options.engine.chat_format = options.chat_format == "chatml" ? ChatFormat::kChatml : ChatFormat::kTemplate;
  session.log.info("loading " + cudaagent::quoted(options.engine.checkpoint) + " on " + options.engine.device);
  auto engine = Engine::start(options.engine);
  if (!engine) return engine.status();
  const std::string name =
      options.served_model_name.empty() ? default_model_name(options.engine.checkpoint) : options.served_model_name;
  OpenAiRoutes routes(*engine.value(), name);
  HttpServerOptions http;
  http.host = options.host;
  http.port = options.port;
  auto server = HttpServer::start(http, [&routes](const HttpServerRequest& r) { return routes.handle(r); });
  if (!server) return server.status();
  const EngineInfo info = engine.value()->info();
  const std::string host = options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
  const std::string url = "http://" + host + ":" + std::to_string(server.value()->port()) + "/v1";
  std::string record;
  JsonWriter w(record);
  w.begin_object().key("serve").begin_object().field("url", url).field("model", name);
  w.field("port", static_cast<std::int64_t>(server.value()->port())).field("checkpoint", info.checkpoint);
  w.field("max_model_len", info.max_model_len).field("max_num_seqs", info.max_batch);
  w.field("device", info.device).field("dtype", info.dtype);
  w.field("tokenizer_sha256", engine.value()->tokenizer().sha256());
  w.field("chat_template_sha256", engine.value()->chat_template().sha256());
  w.field("chat_template_verified", engine.value()->chat_template().verified());
  w.end_object().end_object();
  record.push_back('\n');
  std::fputs(record.c_str(), stdout);
  std::fflush(stdout);
  session.log.info("serving '" + name + "' at " + url);

  while (session.stop_signal.load() == 0) {
    if (!hangup.wait(0.2)) continue;
    session.log.info("SIGHUP: reloading " + cudaagent::quoted(engine.value()->info().checkpoint));
    auto version = engine.value()->reload("");
    if (version) session.log.info("weights version " + std::to_string(version.value()));
    else session.log.error("reload failed: " + version.status().message());
  }
  session.log.info("stopping");
  engine.value()->stop();  // waiting clients get an error now rather than after their generation
  server.value().reset();  // joins the connection threads, which may still use the engine
  return StageEnd::kCompleted;
}

}  // namespace cudaagent::train
