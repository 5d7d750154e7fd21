// The operator catalog of cudaagent-synth: torch operators and our own transformer blocks, each
// with the tensor it accepts, how its parameters are drawn, its shape rule, its Python templates
// and its cost model. The catalog is data (share/synth/operators.json, format in
// share/synth/README.md); this module loads it, resolves every name in every expression and
// template against the entry's scope, and rejects a bad entry with a message naming it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"
#include "cudaagent/synth/expr.h"

namespace cudaagent::synth {

// How one parameter (or one dimension of a start shape) gets its value.
struct ParamSpec {
  enum class Kind {
    kSize,     // [lo, hi] or [lo, hi, multiple]: log-uniform integer, capped by --max-dim
    kRange,    // {"range": [lo, hi]}: uniform integer
    kChoice,   // {"choice": [n, ...]}: one of the numbers
    kText,     // {"text": ["'a'", ...]}: one of the strings, written verbatim; its value is the index
    kBool,     // {"bool": p}: True with probability p; value 1 or 0
    kFloat,    // {"float": [lo, hi]}: uniform real, rounded to 3 significant digits
    kDerived,  // "expression" or a number: computed, never drawn
  };
  std::string name;
  Kind kind = Kind::kDerived;
  std::int64_t lo = 0, hi = 0, multiple = 1;  // kSize, kRange
  double real_lo = 0, real_hi = 0;            // kFloat; kBool: real_lo is the probability
  std::vector<double> choices;                // kChoice
  std::vector<std::string> texts;             // kText
  Expr derived;                               // kDerived
  int slot = -1;                              // where the value lives in the entry's scope
};

// The shape rules the composer understands (arguments are expressions, see DESIGN in README.md).
enum class ShapeRuleKind {
  kSame,            // same()
  kSet,             // set(dim, n): dimension `dim` (negative counts from the end) becomes n
  kConv,            // conv(out_channels, kernel, stride, padding, dilation): dims 2.. convolved
  kConvTranspose,   // conv_transpose(out_channels, kernel, stride, padding, output_padding, dilation)
  kPool,            // pool(kernel, stride, padding, dilation, ceil_mode): dims 2.., channels kept
  kAdaptive,        // adaptive(n): dims 2.. become n
  kReduce,          // reduce(dim, keepdim): dim (never the batch) removed, or kept as 1
  kFlatten,         // flatten(start): dims start.. merged into one
  kTranspose,       // transpose(a, b)
  kUpsample,        // upsample(scale): dims 2.. multiplied by scale
  kPixelShuffle,    // pixel_shuffle(r): channels / r^2, dims 2.. * r
  kPixelUnshuffle,  // pixel_unshuffle(r): channels * r^2, dims 2.. / r (must divide)
  kShape,           // shape(e1, e2, ...): the whole shape, batch first
};

struct ShapeRule {
  ShapeRuleKind kind = ShapeRuleKind::kSame;
  std::vector<Expr> args;
  std::string text;
};

// A named way to draw the first input of a task: dims after the batch, in order.
struct StartShape {
  std::string name;
  std::int64_t batch_lo = 1, batch_hi = 1;
  std::vector<ParamSpec> dims;  // kSize, kRange, kChoice or kDerived over earlier dims
};

// An extra tensor input of an operator (the second operand of bmm, the other side of x * y).
struct ExtraInput {
  bool like_input = false;   // "input": the same shape as the operator's input
  std::vector<Expr> dims;    // otherwise its whole shape; may use `batch`
};

enum class MathKind { kFp32, kConv, kNone };  // which throughput the FLOPs run at

struct OpEntry {
  std::string name, family, doc;
  std::string min_torch;  // empty: the catalog's floor
  int rank = 0;           // exact rank of the accepted tensor, or 0 with min_rank
  int min_rank = 1;
  std::vector<std::string> dim_names;  // bound right-aligned to the accepted tensor's dims
  std::vector<int> starts;             // StartShape indices for the first position
  std::vector<ParamSpec> params;
  std::vector<Expr> requirements;  // "requires" in the catalog
  ShapeRule shape;
  std::vector<ExtraInput> extra_inputs;
  std::string init;     // Python constructor expression; empty for functional operators
  std::string forward;  // Python expression of the output
  std::vector<int> helpers;  // indices into Catalog::helpers
  Expr flops, bytes;
  Expr temp;  // elements of the largest intermediate the operator holds (memory cap); may be empty
  int kernels = 1;
  MathKind math = MathKind::kFp32;
  bool standalone = true;  // may be a task on its own (false for views such as flatten)
  bool terminal = false;   // only as the last operator (its output is not a float tensor)
  double weight = 1.0;     // relative chance of being picked

  // The entry's scope: slots in this order.
  int slot_count = 0;
  std::vector<std::string> slot_names;
  std::optional<int> slot_of(std::string_view name) const;
};

// Fixed slots of every entry's scope.
inline constexpr int kSlotEsize = 0;   // bytes per element (4 for float32)
inline constexpr int kSlotRank = 1;    // rank of the input
inline constexpr int kSlotIn = 2;      // elements of the input
inline constexpr int kSlotBatch = 3;   // dim 0 of the input
inline constexpr int kSlotLast = 4;    // last dim of the input
inline constexpr int kSlotOut = 5;     // elements of the output (costs only)
inline constexpr int kSlotOutRank = 6; // rank of the output (costs only)
inline constexpr int kFirstSlotInN = 7;  // in1, in2, ...: elements of the extra inputs (costs only)
inline constexpr int kMaxExtraInputs = 3;
inline constexpr int kFirstSlotDim = kFirstSlotInN + kMaxExtraInputs;  // d1..d5: dims by position
inline constexpr int kMaxNamedDims = 5;  // (1 where the input has no such dim)
inline constexpr int kFirstNamedSlot = kFirstSlotDim + kMaxNamedDims;

struct Helper {
  std::string name;
  std::string text;  // Python source, '\n'-terminated lines
};

struct Catalog {
  std::string path;
  std::string torch_floor = "1.13";
  std::vector<StartShape> starts;
  std::vector<Helper> helpers;
  std::vector<OpEntry> ops;

  // Index of the operator, or nullopt.
  std::optional<int> find(std::string_view name) const;
  // Names of the families, in catalog order, without repeats.
  std::vector<std::string> families() const;
};

// Parses and checks a catalog. On failure the message names the file, the entry and the field:
// "operators.json: operator 'conv2d': cost.flops: unknown name 'kernal_size' at 9 in '...'".
Result<Catalog> parse_catalog(std::string_view json, const std::string& path);
Result<Catalog> load_catalog(const std::string& path);

// The default catalog: <share_dir()>/synth/operators.json.
std::string default_catalog_path();

// Resolves a comma-separated list of operator or family names ("conv2d,activation") to operator
// indices in catalog order. An unknown name is an error naming it.
Result<std::vector<int>> select_operators(const Catalog& catalog, std::string_view list);

// Compares dotted versions numerically ("1.13" < "2.0"); non-numeric parts compare as text.
int compare_versions(std::string_view a, std::string_view b);

}  // namespace cudaagent::synth
