// `cudaagent-train serve`: the engine behind an OpenAI-compatible HTTP API, so rollouts can run
// against the policy being trained with no other server. Routes (man/cudaagent-train.1 has the
// fields):
//   POST /v1/chat/completions  messages + tools in, ChatML prompt, one completion with tool calls,
//                              sampled token ids and their log-probabilities (vLLM's extensions:
//                              return_token_ids, prompt_token_ids, ignore_eos, stop_token_ids, ...)
//   GET  /v1/models            the served model, its context length and fingerprints
//   POST /tokenize             vLLM's: a prompt or messages in, token ids out
//   POST /v1/reload            {"checkpoint": DIR}: new weights without a restart (also SIGHUP,
//                              which re-reads the checkpoint being served)
//   GET  /health
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "cudaagent/records/cli.h"
#include "cudaagent/train/engine.h"
#include "cudaagent/train/http_server.h"

namespace cudaagent::train {

struct ServeOptions {
  EngineOptions engine;
  std::string chat_format = "template";  // template | chatml
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;
  std::string served_model_name;  // empty: the checkpoint directory's name
};

CLI::App* add_serve_command(CLI::App& app, ServeOptions& options, CommonOptions& common);

// Starts the engine and the server, writes one record naming the URL to stdout, and serves until
// SIGINT or SIGTERM. SIGHUP reloads the checkpoint in place.
Result<StageEnd> run_serve(ServeOptions& options, Session& session);

// The HTTP routes over an engine, without a socket (so tests can call them directly).
// Thread-safe.
class OpenAiRoutes {
 public:
  OpenAiRoutes(Engine& engine, std::string served_model_name);
  HttpServerResponse handle(const HttpServerRequest& request);

 private:
  HttpServerResponse chat_completions(const std::string& body);
  HttpServerResponse models();
  HttpServerResponse tokenize(const std::string& body);
  HttpServerResponse reload(const std::string& body);
  std::string next_id();

  Engine& engine_;
  std::string name_;
  std::uint64_t id_base_;
  std::atomic<std::uint64_t> id_counter_{0};
};

}  // namespace cudaagent::train
