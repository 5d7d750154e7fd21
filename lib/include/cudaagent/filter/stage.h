// cudaagent-filter as a library: options, flags and the per-record stage over TaskFilter, so the
// tool's main is a few lines and tests can drive the stage in-process.
#pragma once

#include <cstdint>
#include <string>

#include "cudaagent/filter/filter.h"
#include "cudaagent/records/cli.h"

namespace cudaagent {

struct FilterOptions {
  CommonOptions common;
  FilterSettings settings;
  std::string window = "1,100";  // --window-ms LOW,HIGH, parsed into settings
  std::string memory_limit = "16G";
  std::string gpus;              // --gpus LIST; empty: CUDA_VISIBLE_DEVICES or every GPU
  std::string run_as;            // --run-as UID[:GID]
  bool no_compile = false;
  bool kept_only = false;        // drop rejected records instead of writing them with kept:false
  bool allow_unsandboxed = false;
  bool no_sandbox = false;
  std::string bwrap = "bwrap";
};

void add_filter_flags(CLI::App& app, FilterOptions& options);

// "1,100" -> {1, 100}: two numbers >= 0, the first not above the second. A Status otherwise.
Result<std::pair<double, double>> parse_window(std::string_view text);

// "16G", "512M", "1024" (bytes), "0" (none): a size with an optional K, M, G or T suffix
// (powers of 1024). A Status otherwise.
Result<std::uint64_t> parse_size(std::string_view text);

// Filters every task record of the inputs: each gets a "filter" key (kept or not, and why);
// with --kept-only, rejected ones are left out. With --db, results are committed to the store
// before their records are written downstream, and a task filtered before (same source, settings,
// torch and device) takes the stored result without running. Returns as run_record_stage does.
Result<StageEnd> run_filter(FilterOptions& options, Session& session);

}  // namespace cudaagent
