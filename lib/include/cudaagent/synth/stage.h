// cudaagent-synth as a library: options, flags and the run, so the tool's main is a few lines and
// tests can drive it in-process. Three ways to make tasks: the random composer (default), a fixed
// chain of operators (--chain), and compositions proposed by a model (--endpoint, --model).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudaagent/records/cli.h"
#include "cudaagent/synth/catalog.h"
#include "cudaagent/synth/compose.h"
#include "cudaagent/synth/llm.h"

namespace cudaagent {

struct SynthOptions {
  CommonOptions common;  // -o, --errors, --shard, --quiet
  std::uint64_t seed = 0;
  std::uint64_t count = 10;
  std::string depth_weights = "0.05,0.8377,0.08,0.0223,0.01";
  std::string ops;        // --ops: operator and family names
  std::string chain;      // --chain: exact operators, in order
  std::string window = "1,100";
  std::string catalog_path;  // empty: the installed catalog
  bool list = false;
  std::string import_kernelbench;  // --import-kernelbench DIR: KernelBench's problems as tasks
  double memory_gib = 16;
  synth::ComposeSettings settings;  // filled from the flags above after parsing
  // LLM mode
  synth::LlmSettings llm;
  std::string api_key_env;
  int max_requests = 0;   // 0: twice what --count needs, plus two
  double timeout = 120;
  int retries = 3;
  double backoff = 1.0;

  // Resolved after parsing (by the app's final callback).
  synth::Catalog catalog;
  std::vector<int> allowed;
  std::vector<synth::OpRequest> chain_ops;
  std::string catalog_error;  // the catalog could not be loaded: the run fails with this (exit 1)
};

// Adds the synth flags and a final callback that checks them against each other and the catalog;
// a bad value is a usage error (exit 2).
void add_synth_flags(CLI::App& app, SynthOptions& options);

// Writes --count task records (or the catalog listing with --list, or KernelBench's problems
// with --import-kernelbench). Exit semantics as run_tool:
// per-task failures are error records; a catalog that cannot be loaded, a server that keeps
// failing, or a write error fail the run.
Result<StageEnd> run_synth(SynthOptions& options, Session& session);

}  // namespace cudaagent
