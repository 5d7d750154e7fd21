// The composer of cudaagent-synth: stacks catalog operators into a chain whose shapes fit by
// construction, then picks the batch so the estimated eager time lands in a window. Key design
// choice: the batch is dimension 0 of every tensor and no shape rule or parameter may depend on
// it, so every cost is affine in the batch; the composer builds the chain once at batch 1, reads
// the costs at batches 1 and 2, solves for the batch, and re-evaluates the whole chain at that
// batch, which is what it reports.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/synth/catalog.h"

namespace cudaagent::synth {

using Shape = std::vector<std::int64_t>;

// A portable random stream: std::mt19937_64 (its sequence is fixed by the standard) with our own
// distributions (the standard library's are implementation-defined), so a seed gives the same
// tasks on every platform. Task `index` of seed `seed` has its own stream, which makes any task
// reproducible on its own and shards independent.
class Rng {
 public:
  Rng(std::uint64_t seed, std::uint64_t index);
  std::uint64_t next() { return engine_(); }
  double uniform();                                        // [0, 1)
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);  // [lo, hi]
  std::int64_t log_uniform_int(std::int64_t lo, std::int64_t hi);  // [lo, hi], log-uniform

 private:
  std::mt19937_64 engine_;
};

// What the estimate of eager time assumes about the GPU (see the man page). The defaults are an
// H200 as cudaagent-filter measured it (bench/calibrate_synth.py over 107 tasks' eager medians,
// torch 2.11: the median estimate/measured went from 0.66 to 0.95); the datasheet's figures
// (60, 120, 4.0 and 5 us) put tasks at two thirds of their real time.
struct DeviceModel {
  double fp32_tflops = 45.0;   // FP32 without tensor cores: torch's default for matmul
  double conv_tflops = 207.0;  // cuDNN convolutions, which may use TF32 by default
  double bandwidth_tbs = 3.65;  // HBM, bytes read plus written
  double launch_us = 89.0;     // per kernel launched by eager PyTorch, its Python included
};

struct ComposeSettings {
  // Weight of depth 1, 2, ... (normalised). Default: CUDA Agent's mix, 83.77% two operators.
  std::vector<double> depth_weights = {0.05, 0.8377, 0.08, 0.0223, 0.01};
  double window_lo_ms = 1.0;
  double window_hi_ms = 100.0;
  std::int64_t batch = 0;    // > 0: this batch, and the window is not enforced
  std::int64_t max_dim = 0;  // > 0: no drawn size above this (for quick CPU runs)
  double memory_bytes = 16.0 * (1ull << 30);  // inputs, intermediates and output together
  int attempts = 300;        // random compositions tried per task before giving up
  DeviceModel device;
};

// A parameter value fixed by whoever asked for the composition (an LLM's proposal).
struct ParamOverride {
  std::string name;
  double number = 0;
  std::string text;    // for text parameters (compared with and without quotes)
  bool is_text = false;
};

struct OpRequest {
  int entry = 0;
  std::vector<ParamOverride> params;
};

// One operator placed in a composition, evaluated at the composition's batch.
struct PlacedOp {
  int entry = 0;
  std::vector<double> drawn;  // per parameter: the drawn value (NaN for derived ones)
  std::vector<double> slots;  // the entry's whole scope
  Shape in, out;
  std::vector<Shape> extras;
  double flops = 0, bytes = 0, ms = 0;
  double temp = 0;  // elements of its largest intermediate
};

struct Composition {
  std::int64_t batch = 1;
  int start = 0;     // the StartShape the first input was drawn from
  Shape start_dims;  // the first input's dims after the batch
  std::vector<PlacedOp> ops;
  double flops = 0, bytes = 0, est_ms = 0, memory_bytes = 0;
  std::string min_torch;
};

class Composer {
 public:
  // `allowed`: catalog indices the random composer may use (empty: all). The catalog must outlive
  // the composer. Thread-safe: compose() only reads shared state.
  Composer(const Catalog& catalog, ComposeSettings settings, std::vector<int> allowed = {});

  // The random composition of task `index`: its depth drawn from the weights, operators from the
  // allowed set. An error (with the last reason an attempt failed) when no attempt succeeded.
  Result<Composition> compose(std::uint64_t seed, std::uint64_t index) const;
  // A composition of exactly these operators, in order, with the overrides applied; parameters
  // not overridden are drawn. The error says why the chain cannot be made.
  Result<Composition> compose_chain(const std::vector<OpRequest>& chain, std::uint64_t seed,
                                    std::uint64_t index) const;

  int draw_depth(Rng& rng) const;  // 1-based
  const Catalog& catalog() const { return catalog_; }
  const ComposeSettings& settings() const { return settings_; }

  // Estimated eager milliseconds of one operator's FLOPs, bytes and kernels.
  double op_ms(const OpEntry& entry, double flops, double bytes) const;

 private:
  Status try_random(int depth, Rng& rng, Composition& out) const;
  Status try_chain(const std::vector<OpRequest>& chain, Rng& rng, Composition& out) const;
  Status place(int entry, const Shape& in, Rng& rng, const std::vector<ParamOverride>* overrides,
               PlacedOp& op) const;
  Status evaluate(const OpEntry& entry, const Shape& in, Rng* rng,
                  const std::vector<ParamOverride>* overrides, PlacedOp& op) const;
  Status evaluate_chain(Composition& c, std::int64_t batch) const;
  Status finish(Composition& c, Rng& rng) const;
  Status draw_start(const OpEntry& entry, Rng& rng, Shape& shape, int& start_index) const;

  const Catalog& catalog_;
  ComposeSettings settings_;
  std::vector<int> allowed_;
};

// The shape a rule gives for input `in`, with the entry's scope filled in; a Status when the rule
// cannot apply (a dimension below 1, a non-integer, a dim that is not there).
Result<Shape> apply_shape_rule(const ShapeRule& rule, const Shape& in, std::span<const double> slots);

// "[16, 3, 224, 224]" for messages.
std::string shape_text(const Shape& shape);

}  // namespace cudaagent::synth
