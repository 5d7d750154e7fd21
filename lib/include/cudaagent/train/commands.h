// The inspection subcommands of cudaagent-train (serve is in serve.h):
//   tokenize  records with "text" or "messages" (+ "tools") in, their token ids out (or "ids" in,
//             text out): the tokenizer and chat template exactly as serve and training use them
//   logprobs  records with "ids" in, the model's per-token log-probabilities and entropies out:
//             the numbers a trainer computes, for parity checks against other stacks
//   bench     forward + backward throughput of the training computation on synthetic tokens
#pragma once

#include <cstdint>
#include <string>

#include "cudaagent/records/cli.h"

namespace cudaagent::train {

struct TokenizeOptions {
  std::string tokenizer;                 // directory or tokenizer.json
  std::string chat_format = "template";  // template | chatml
};
CLI::App* add_tokenize_command(CLI::App& app, TokenizeOptions& options, CommonOptions& common);
Result<StageEnd> run_tokenize(const TokenizeOptions& options, const CommonOptions& common, Session& session);

struct LogprobsOptions {
  std::string model;
  std::string device = "cpu";
  std::string dtype = "auto";
  double temperature = 1.0;
  std::int64_t chunk_tokens = 1024;
};
CLI::App* add_logprobs_command(CLI::App& app, LogprobsOptions& options, CommonOptions& common);
Result<StageEnd> run_logprobs(const LogprobsOptions& options, const CommonOptions& common, Session& session);

struct BenchOptions {
  std::string model;
  std::string device = "cpu";
  std::string dtype = "auto";
  std::int64_t batch = 1;
  std::int64_t seq_len = 1024;
  int steps = 5;
  int warmup = 1;
  bool recompute = false;
  std::int64_t chunk_tokens = 1024;
};
CLI::App* add_bench_command(CLI::App& app, BenchOptions& options, CommonOptions& common);
Result<StageEnd> run_bench(const BenchOptions& options, Session& session);

// Versions of the libraries lib/train adds, for --version: torch, PCRE2, utf8proc, libmicrohttpd.
std::vector<std::pair<std::string, std::string>> train_dependency_versions();

}  // namespace cudaagent::train
