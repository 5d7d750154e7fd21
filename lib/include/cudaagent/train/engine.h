// The generation engine behind `cudaagent-train serve`: one thread owns the model and a key/value
// cache of `max_batch` slots and runs continuous batching (a new request is prefilled between
// decoding steps and joins the batch; a finished one leaves it), while any number of client
// threads submit requests and wait for their completions. Sampling is per request (temperature,
// top-p, top-k, a seed of its own). Weights can be replaced while serving: a reload waits for the
// requests in flight to finish on the old weights, swaps, and lets the waiting ones in, so every
// completion comes from exactly one checkpoint, named by its weights_version.
//
// No torch types in this header: the HTTP and record code that uses the engine stays cheap to
// compile.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/train/chat_template.h"
#include "cudaagent/train/model_config.h"
#include "cudaagent/train/openai_api.h"
#include "cudaagent/train/tokenizer.h"

namespace cudaagent::train {

struct EngineOptions {
  std::string checkpoint;          // directory with config.json, weights, tokenizer
  std::string tokenizer;           // directory with tokenizer.json and the chat template;
                                   // empty: the checkpoint's
  std::string device = "cpu";
  std::string dtype = "auto";      // float32, bfloat16, float16, auto (the checkpoint's)
  std::int64_t max_batch = 32;     // sequences decoded together (cache slots)
  std::int64_t max_model_len = 0;  // prompt + completion tokens per sequence; 0: the config's
                                   // max_position_embeddings, at most 32768
  ChatFormat chat_format = ChatFormat::kTemplate;
};

struct GenerationRequest {
  std::vector<TokenId> prompt;
  SamplingOptions sampling;
};

// What the engine serves, for /v1/models and logs.
struct EngineInfo {
  std::string checkpoint;
  std::uint64_t weights_version = 0;  // 1 for the first checkpoint, +1 per reload
  std::int64_t max_model_len = 0;
  std::int64_t max_batch = 0;
  std::string device, dtype;
  std::vector<TokenId> eos_token_ids;
};

class Engine {
 public:
  // Loads the checkpoint, its tokenizer and chat template, allocates the cache and starts the
  // engine thread. A Status when any of them cannot be had.
  static Result<std::unique_ptr<Engine>> start(const EngineOptions& options);
  // Stops the engine thread: requests waiting or in flight get a Status, later ones too. The
  // engine stays valid (for threads still holding it). Idempotent; the destructor calls it.
  void stop();
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Generates one completion. Blocks until it is done. A Status for a request that cannot run
  // (an empty or too long prompt, a token id outside the vocabulary) or when the engine stops
  // first. Thread-safe.
  Result<Completion> generate(GenerationRequest request);

  // Replaces the weights with those of `checkpoint` (the current one when empty) once the
  // requests in flight have finished; requests that arrive meanwhile wait. The new checkpoint
  // must have the same architecture, and the same tokenizer.json when it has one. Blocks until
  // done; returns the new weights_version. Thread-safe.
  Result<std::uint64_t> reload(const std::string& checkpoint);

  EngineInfo info() const;  // thread-safe
  const Tokenizer& tokenizer() const;
  const ChatTemplate& chat_template() const;

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cudaagent::train
