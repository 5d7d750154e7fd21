// LLM mode of cudaagent-synth: ask a model on an OpenAI-compatible server to propose compositions
// of catalog operators, and turn its reply into chains for the composer, which validates them
// like any other (shapes, parameters, the time window). The model chooses operators and, if it
// wants, parameter values; it never writes code, so every task is built from catalog templates.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/synth/catalog.h"
#include "cudaagent/synth/compose.h"

namespace cudaagent::synth {

struct LlmSettings {
  std::string endpoint;   // server base URL, or the full .../chat/completions URL
  std::string model;
  double temperature = 0.8;
  int max_tokens = 4096;
  int per_request = 8;    // compositions asked for in one request
};

// endpoint + "/v1/chat/completions", unless the endpoint already ends in "/chat/completions".
std::string chat_completions_url(std::string_view endpoint);

// The JSON body of one request: a system message describing the task format and the operators
// in `allowed`, a user message asking for `settings.per_request` compositions with the depth mix
// of `depth_weights`, and the sampling settings (with `seed`).
std::string proposal_request_body(const Catalog& catalog, const std::vector<int>& allowed,
                                  const LlmSettings& settings,
                                  const std::vector<double>& depth_weights, std::uint64_t seed);

// The assistant's text in a chat-completion response body; a Status saying what is wrong when the
// body is not one ("response is not JSON", "no choices[0].message.content").
Result<std::string> chat_completion_content(std::string_view body);

struct Proposal {
  std::string raw;              // the proposal as the model wrote it (minified JSON)
  std::vector<OpRequest> chain; // usable when `error` is empty
  std::string error;            // why it cannot be used: "unknown operator 'conv4d'"
};

// The proposals in a model's reply: the first JSON value in the text (code fences allowed), either
// a list of compositions or {"compositions": [...]}; a composition is a list of operator names
// and {"op": name, "params": {...}} objects, or {"ops": [...]}. Operators outside `allowed` are
// errors of that proposal. A Status when the reply holds no such JSON at all.
Result<std::vector<Proposal>> parse_proposals(std::string_view content, const Catalog& catalog,
                                              const std::vector<int>& allowed);

}  // namespace cudaagent::synth
