// Composition: draw a chain at batch 1, solve the batch against the time window from the affine
// costs, then evaluate the chain again at that batch. A failed attempt is a reason, not an error;
// the caller tries again from the same random stream, so results stay deterministic.
#include "cudaagent/synth/compose.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace cudaagent::synth {
namespace {

constexpr std::int64_t kMaxElements = (std::int64_t{1} << 31) - 1;  // many CUDA kernels index in int32
// The task's output travels between processes as one tensor file, which the filter and the
// verifier read up to 4 GiB (tensor_file.h's default cap): float32 elements, 1 MiB left for the
// header. A larger output could never be judged, so it is never drawn.
constexpr std::int64_t kMaxOutputElements = ((std::int64_t{4} << 30) - (std::int64_t{1} << 20)) / 4;
constexpr int kParamDraws = 8;     // parameter draws tried for one operator at one position
constexpr int kOperatorPicks = 12; // operators tried for one position
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kRoundSizeShare = 0.75;  // drawn sizes snapped to round numbers; the rest stay odd

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool to_int(double value, std::int64_t& out) {
  if (!std::isfinite(value) || std::fabs(value) > 9e15 || std::floor(value) != value) return false;
  out = static_cast<std::int64_t>(value);
  return true;
}

double numel(const Shape& shape) {
  double n = 1;
  for (auto d : shape) n *= static_cast<double>(d);
  return n;
}

// Three significant digits, so a drawn real reads the same in Python as in the estimate.
double round3(double value) {
  if (value == 0 || !std::isfinite(value)) return value;
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return std::strtod(buffer, nullptr);
}

std::string strip_quotes(std::string_view s) {
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) {
    return std::string(s.substr(1, s.size() - 2));
  }
  return std::string(s);
}

// The round number nearest to k: k itself up to 8, else m * 2^e with m in 4..8, so sizes read
// like the ones people pick (48, 96, 384, 1792) rather than 1217.
std::int64_t round_size(std::int64_t k) {
  if (k <= 8) return k;
  int e = 0;
  while ((k >> (e + 1)) >= 4) ++e;  // the largest power of two with k / 2^e >= 4
  const std::int64_t unit = std::int64_t{1} << e;
  return ((k + unit / 2) / unit) * unit;
}

// The round number nearest to k inside [lo, hi], or k when none is close.
std::int64_t round_within(std::int64_t k, std::int64_t lo, std::int64_t hi) {
  const std::int64_t r = round_size(k);
  return r >= lo && r <= hi ? r : k;
}

struct SizeBounds {
  std::int64_t lo, hi, multiple;
};
// A size range under --max-dim: the cap lowers hi (and lo when needed) but never below one
// multiple, so constraints such as "a multiple of 64" survive tiny runs.
SizeBounds capped(const ParamSpec& spec, std::int64_t max_dim) {
  std::int64_t hi = max_dim > 0 ? std::min(spec.hi, max_dim) : spec.hi;
  std::int64_t lo = std::min(spec.lo, hi);
  const std::int64_t m = spec.multiple;
  std::int64_t k_hi = std::max<std::int64_t>(1, hi / m);
  std::int64_t k_lo = std::min(std::max<std::int64_t>(1, (lo + m - 1) / m), k_hi);
  return {k_lo, k_hi, m};
}

double draw_spec(const ParamSpec& spec, Rng& rng, std::int64_t max_dim) {
  using Kind = ParamSpec::Kind;
  switch (spec.kind) {
    case Kind::kSize: {
      const SizeBounds b = capped(spec, max_dim);
      std::int64_t k = rng.log_uniform_int(b.lo, b.hi);
      if (rng.uniform() < kRoundSizeShare) k = round_within(k, b.lo, b.hi);
      return static_cast<double>(b.multiple * k);
    }
    case Kind::kRange: return static_cast<double>(rng.uniform_int(spec.lo, spec.hi));
    case Kind::kChoice:
      return spec.choices[static_cast<std::size_t>(
          rng.uniform_int(0, static_cast<std::int64_t>(spec.choices.size()) - 1))];
    case Kind::kText:
      return static_cast<double>(rng.uniform_int(0, static_cast<std::int64_t>(spec.texts.size()) - 1));
    case Kind::kBool: return rng.uniform() < spec.real_lo ? 1.0 : 0.0;
    case Kind::kFloat: return round3(spec.real_lo + rng.uniform() * (spec.real_hi - spec.real_lo));
    case Kind::kDerived: break;
  }
  return kNaN;
}

// The value an override asks for, if the parameter allows it.
Result<double> override_value(const ParamSpec& spec, const ParamOverride& o) {
  using Kind = ParamSpec::Kind;
  const std::string bad = "parameter '" + spec.name + "' cannot be ";
  if (spec.kind == Kind::kDerived) return Status::error("parameter '" + spec.name + "' is derived, not chosen");
  if (spec.kind == Kind::kText) {
    for (std::size_t i = 0; i < spec.texts.size(); ++i) {
      if (o.is_text && (o.text == spec.texts[i] || strip_quotes(o.text) == strip_quotes(spec.texts[i]))) {
        return static_cast<double>(i);
      }
    }
    std::string allowed;
    for (const auto& t : spec.texts) allowed += (allowed.empty() ? "" : ", ") + t;
    return Status::error(bad + (o.is_text ? "'" + o.text + "'" : "a number") + " (one of " + allowed + ")");
  }
  if (o.is_text) return Status::error(bad + "text");
  const double v = o.number;
  std::int64_t n = 0;
  switch (spec.kind) {
    case Kind::kSize:
      if (to_int(v, n) && n >= spec.lo && n <= spec.hi && n % spec.multiple == 0) return v;
      return Status::error(bad + std::to_string(v) + " (an integer in [" + std::to_string(spec.lo) +
                           ", " + std::to_string(spec.hi) + "]" +
                           (spec.multiple > 1 ? ", a multiple of " + std::to_string(spec.multiple) : "") + ")");
    case Kind::kRange:
      if (to_int(v, n) && n >= spec.lo && n <= spec.hi) return v;
      return Status::error(bad + std::to_string(v) + " (an integer in [" + std::to_string(spec.lo) +
                           ", " + std::to_string(spec.hi) + "])");
    case Kind::kChoice:
      if (std::find(spec.choices.begin(), spec.choices.end(), v) != spec.choices.end()) return v;
      return Status::error(bad + std::to_string(v) + " (not one of its choices)");
    case Kind::kBool:
      if (v == 0 || v == 1) return v;
      return Status::error(bad + std::to_string(v) + " (true or false)");
    case Kind::kFloat:
      if (v >= spec.real_lo && v <= spec.real_hi) return v;
      return Status::error(bad + std::to_string(v) + " (outside its range)");
    default: break;
  }
  return Status::error(bad + "set");
}

Status invalid(const OpEntry& entry, const std::string& why) {
  return Status::error(entry.name + ": " + why);
}

}  // namespace

// ---- Rng ----

Rng::Rng(std::uint64_t seed, std::uint64_t index)
    : engine_(splitmix64(splitmix64(seed) ^ splitmix64(index + 0x632be59bd9b4e019ull))) {}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::int64_t Rng::uniform_int(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  __extension__ using Wide = unsigned __int128;  // the high half of a 64x64 product: no modulo bias to speak of
  const auto range = static_cast<Wide>(static_cast<std::uint64_t>(hi - lo) + 1);
  return lo + static_cast<std::int64_t>((static_cast<Wide>(next()) * range) >> 64);
}

std::int64_t Rng::log_uniform_int(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  const double a = std::log(static_cast<double>(lo));
  const double b = std::log(static_cast<double>(hi) + 1.0);
  const auto v = static_cast<std::int64_t>(std::floor(std::exp(a + uniform() * (b - a))));
  return std::clamp(v, lo, hi);
}

// ---- shape rules ----

std::string shape_text(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// One case per shape rule kind, kept in one switch so that the rules read as one table (and the
// compiler says when a kind has no case).
Result<Shape> apply_shape_rule(const ShapeRule& rule, const Shape& in, std::span<const double> slots) {
  std::vector<std::int64_t> a(rule.args.size());
  for (std::size_t i = 0; i < rule.args.size(); ++i) {
    const double v = rule.args[i].eval(slots);
    if (!to_int(v, a[i])) {
      return Status::error("shape rule argument '" + rule.args[i].text() + "' is not an integer");
    }
  }
  const auto rank = static_cast<std::int64_t>(in.size());
  auto dim_index = [&](std::int64_t d, std::int64_t r, std::int64_t& out) {
    out = d < 0 ? d + r : d;
    return out >= 1 && out < r;  // never the batch
  };
  Shape out = in;
  switch (rule.kind) {
    case ShapeRuleKind::kSame: break;
    case ShapeRuleKind::kSet: {
      std::int64_t d = 0;
      if (!dim_index(a[0], rank, d)) return Status::error("set(): no dim " + std::to_string(a[0]));
      out[static_cast<std::size_t>(d)] = a[1];
      break;
    }
    case ShapeRuleKind::kConv:
    case ShapeRuleKind::kPool: {
      const bool conv = rule.kind == ShapeRuleKind::kConv;
      const std::int64_t k = a[conv ? 1 : 0], s = a[conv ? 2 : 1], p = a[conv ? 3 : 2],
                         d = a[conv ? 4 : 3];
      const bool ceil_mode = !conv && a[4] != 0;
      if (rank < 3 || s < 1 || k < 1 || d < 1 || p < 0) return Status::error("conv/pool: bad arguments");
      if (conv) out[1] = a[0];
      for (std::size_t i = 2; i < in.size(); ++i) {
        const std::int64_t span = in[i] + 2 * p - d * (k - 1) - 1;
        if (span < 0) return Status::error("kernel larger than the padded input");
        std::int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
        if (ceil_mode && (o - 1) * s >= in[i] + p) --o;  // torch: the last window must start inside
        out[i] = o;
      }
      break;
    }
    case ShapeRuleKind::kConvTranspose: {
      const std::int64_t k = a[1], s = a[2], p = a[3], op = a[4], d = a[5];
      if (rank < 3 || s < 1 || k < 1 || d < 1 || p < 0 || op < 0) {
        return Status::error("conv_transpose: bad arguments");
      }
      out[1] = a[0];
      for (std::size_t i = 2; i < in.size(); ++i) out[i] = (in[i] - 1) * s - 2 * p + d * (k - 1) + op + 1;
      break;
    }
    case ShapeRuleKind::kAdaptive:
      if (rank < 3) return Status::error("adaptive(): needs spatial dims");
      for (std::size_t i = 2; i < in.size(); ++i) out[i] = a[0];
      break;
    case ShapeRuleKind::kReduce: {
      std::int64_t d = 0;
      if (!dim_index(a[0], rank, d)) return Status::error("reduce(): no dim " + std::to_string(a[0]));
      if (a[1] != 0) out[static_cast<std::size_t>(d)] = 1;
      else out.erase(out.begin() + d);
      break;
    }
    case ShapeRuleKind::kFlatten: {
      std::int64_t d = 0;
      if (!dim_index(a[0], rank, d)) return Status::error("flatten(): no dim " + std::to_string(a[0]));
      std::int64_t merged = 1;
      for (std::size_t i = static_cast<std::size_t>(d); i < in.size(); ++i) merged *= in[i];
      out.resize(static_cast<std::size_t>(d));
      out.push_back(merged);
      break;
    }
    case ShapeRuleKind::kTranspose: {
      std::int64_t d0 = 0, d1 = 0;
      if (!dim_index(a[0], rank, d0) || !dim_index(a[1], rank, d1)) {
        return Status::error("transpose(): dims must exist and not be the batch");
      }
      std::swap(out[static_cast<std::size_t>(d0)], out[static_cast<std::size_t>(d1)]);
      break;
    }
    case ShapeRuleKind::kUpsample:
      if (rank < 3 || a[0] < 1) return Status::error("upsample(): bad arguments");
      for (std::size_t i = 2; i < in.size(); ++i) out[i] = in[i] * a[0];
      break;
    case ShapeRuleKind::kPixelShuffle:
    case ShapeRuleKind::kPixelUnshuffle: {
      const std::int64_t r = a[0];
      if (rank < 4 || r < 1) return Status::error("pixel_(un)shuffle(): needs rank 4 and r >= 1");
      const std::size_t c = in.size() - 3;
      if (rule.kind == ShapeRuleKind::kPixelShuffle) {
        if (in[c] % (r * r) != 0) return Status::error("channels not divisible by r^2");
        out[c] = in[c] / (r * r);
        out[c + 1] = in[c + 1] * r;
        out[c + 2] = in[c + 2] * r;
      } else {
        if (in[c + 1] % r != 0 || in[c + 2] % r != 0) return Status::error("spatial dims not divisible by r");
        out[c] = in[c] * r * r;
        out[c + 1] = in[c + 1] / r;
        out[c + 2] = in[c + 2] / r;
      }
      break;
    }
    case ShapeRuleKind::kShape:
      out.assign(a.begin(), a.end());
      if (out.empty() || out[0] != in[0]) return Status::error("shape(): the batch must stay first");
      break;
  }
  for (auto d : out) {
    if (d < 1) return Status::error("output shape " + shape_text(out) + " has an empty dim");
    if (d > kMaxElements) return Status::error("output dim too large");
  }
  return out;
}

// ---- Composer ----

Composer::Composer(const Catalog& catalog, ComposeSettings settings, std::vector<int> allowed)
    : catalog_(catalog), settings_(std::move(settings)), allowed_(std::move(allowed)) {
  if (allowed_.empty()) {
    for (std::size_t i = 0; i < catalog_.ops.size(); ++i) allowed_.push_back(static_cast<int>(i));
  }
}

int Composer::draw_depth(Rng& rng) const {
  double total = 0;
  for (double w : settings_.depth_weights) total += w;
  double u = rng.uniform() * total;
  for (std::size_t i = 0; i < settings_.depth_weights.size(); ++i) {
    if (u < settings_.depth_weights[i]) return static_cast<int>(i) + 1;
    u -= settings_.depth_weights[i];
  }
  // Rounding left u at the top: the last depth with weight.
  for (std::size_t i = settings_.depth_weights.size(); i > 0; --i) {
    if (settings_.depth_weights[i - 1] > 0) return static_cast<int>(i);
  }
  return 1;
}

double Composer::op_ms(const OpEntry& entry, double flops, double bytes) const {
  if (entry.kernels == 0) return 0;  // a view: nothing runs on the device
  const DeviceModel& d = settings_.device;
  double compute = 0;
  if (entry.math == MathKind::kFp32) compute = flops / (d.fp32_tflops * 1e12);
  else if (entry.math == MathKind::kConv) compute = flops / (d.conv_tflops * 1e12);
  const double memory = bytes / (d.bandwidth_tbs * 1e12);
  return entry.kernels * d.launch_us * 1e-3 + std::max(compute, memory) * 1e3;
}

Status Composer::evaluate(const OpEntry& entry, const Shape& in, Rng* rng,
                          const std::vector<ParamOverride>* overrides, PlacedOp& op) const {
  const auto rank = static_cast<int>(in.size());
  if (entry.rank != 0 ? rank != entry.rank : rank < entry.min_rank) {
    return invalid(entry, "needs a tensor of rank " +
                              (entry.rank != 0 ? std::to_string(entry.rank)
                                               : "at least " + std::to_string(entry.min_rank)) +
                              ", got " + shape_text(in));
  }
  std::vector<double>& s = op.slots;
  s.assign(static_cast<std::size_t>(entry.slot_count), kNaN);
  s[kSlotEsize] = 4;  // float32
  s[kSlotRank] = rank;
  s[kSlotIn] = numel(in);
  s[kSlotBatch] = static_cast<double>(in[0]);
  s[kSlotLast] = static_cast<double>(in.back());
  for (int k = 0; k < kMaxNamedDims; ++k) {
    const std::size_t dim = static_cast<std::size_t>(k) + 1;
    s[static_cast<std::size_t>(kFirstSlotDim + k)] = dim < in.size() ? static_cast<double>(in[dim]) : 1.0;
  }
  const std::size_t named = entry.dim_names.size();
  for (std::size_t k = 0; k < named; ++k) {
    s[static_cast<std::size_t>(kFirstNamedSlot) + k] = static_cast<double>(in[in.size() - named + k]);
  }
  if (rng != nullptr) op.drawn.assign(entry.params.size(), kNaN);
  for (std::size_t i = 0; i < entry.params.size(); ++i) {
    const ParamSpec& spec = entry.params[i];
    double value = 0;
    if (spec.kind == ParamSpec::Kind::kDerived) {
      value = spec.derived.eval(s);
    } else if (rng != nullptr) {
      value = draw_spec(spec, *rng, settings_.max_dim);
      if (overrides != nullptr) {
        for (const auto& o : *overrides) {
          if (o.name != spec.name) continue;
          auto fixed = override_value(spec, o);
          if (!fixed) return invalid(entry, fixed.status().message());
          value = fixed.value();
        }
      }
      op.drawn[i] = value;
    } else {
      value = op.drawn[i];
    }
    if (!std::isfinite(value)) return invalid(entry, "parameter '" + spec.name + "' is not finite");
    s[static_cast<std::size_t>(spec.slot)] = value;
  }
  for (const Expr& requirement : entry.requirements) {
    if (requirement.eval(s) == 0) return invalid(entry, "requirement '" + requirement.text() + "' fails");
  }
  auto out = apply_shape_rule(entry.shape, in, s);
  if (!out) return invalid(entry, out.status().message());
  op.in = in;
  op.out = std::move(out).value();
  if (numel(op.out) > static_cast<double>(kMaxElements)) return invalid(entry, "output too large");
  op.extras.clear();
  for (std::size_t k = 0; k < entry.extra_inputs.size(); ++k) {
    const ExtraInput& extra = entry.extra_inputs[k];
    Shape shape = in;
    if (!extra.like_input) {
      shape.clear();
      for (const Expr& dim : extra.dims) {
        std::int64_t n = 0;
        if (!to_int(dim.eval(s), n) || n < 1 || n > kMaxElements) {
          return invalid(entry, "extra input dim '" + dim.text() + "' is not a positive integer");
        }
        shape.push_back(n);
      }
    }
    if (numel(shape) > static_cast<double>(kMaxElements)) return invalid(entry, "extra input too large");
    s[static_cast<std::size_t>(kFirstSlotInN) + k] = numel(shape);
    op.extras.push_back(std::move(shape));
  }
  s[kSlotOut] = numel(op.out);
  s[kSlotOutRank] = static_cast<double>(op.out.size());
  op.flops = entry.flops.eval(s);
  op.bytes = entry.bytes.eval(s);
  if (!std::isfinite(op.flops) || !std::isfinite(op.bytes) || op.flops < 0 || op.bytes < 0) {
    return invalid(entry, "cost model gives no finite non-negative value");
  }
  op.temp = entry.temp.empty() ? 0.0 : entry.temp.eval(s);
  if (!std::isfinite(op.temp) || op.temp < 0) return invalid(entry, "temp gives no finite non-negative value");
  if (op.temp > static_cast<double>(kMaxElements)) return invalid(entry, "intermediate too large");
  op.ms = op_ms(entry, op.flops, op.bytes);
  return Status::ok();
}

Status Composer::place(int entry_index, const Shape& in, Rng& rng,
                       const std::vector<ParamOverride>* overrides, PlacedOp& op) const {
  const OpEntry& entry = catalog_.ops[static_cast<std::size_t>(entry_index)];
  op.entry = entry_index;
  Status last = Status::ok();
  for (int draw = 0; draw < kParamDraws; ++draw) {
    last = evaluate(entry, in, &rng, overrides, op);
    if (last) return last;
  }
  return last;
}

Status Composer::draw_start(const OpEntry& entry, Rng& rng, Shape& shape, int& start_index) const {
  const auto pick = rng.uniform_int(0, static_cast<std::int64_t>(entry.starts.size()) - 1);
  start_index = entry.starts[static_cast<std::size_t>(pick)];
  const StartShape& start = catalog_.starts[static_cast<std::size_t>(start_index)];
  std::vector<double> values(start.dims.size(), kNaN);
  shape.assign(1, 1);  // the batch, solved later
  for (std::size_t i = 0; i < start.dims.size(); ++i) {
    const ParamSpec& spec = start.dims[i];
    const double v = spec.kind == ParamSpec::Kind::kDerived ? spec.derived.eval(values)
                                                            : draw_spec(spec, rng, settings_.max_dim);
    std::int64_t n = 0;
    if (!to_int(v, n) || n < 1) return Status::error("start shape '" + start.name + "': bad dim " + spec.name);
    values[i] = v;
    shape.push_back(n);
  }
  return Status::ok();
}

namespace {

Status output_readable(const Composition& c) {
  if (numel(c.ops.back().out) > static_cast<double>(kMaxOutputElements)) {
    return Status::error("output over the 4 GiB a verifier reads");
  }
  return Status::ok();
}

}  // namespace

Status Composer::evaluate_chain(Composition& c, std::int64_t batch) const {
  Shape shape;
  shape.push_back(batch);
  shape.insert(shape.end(), c.start_dims.begin(), c.start_dims.end());
  c.flops = c.bytes = c.est_ms = 0;
  c.memory_bytes = numel(shape) * 4;
  for (PlacedOp& op : c.ops) {
    const OpEntry& entry = catalog_.ops[static_cast<std::size_t>(op.entry)];
    if (auto status = evaluate(entry, shape, nullptr, nullptr, op); !status) return status;
    c.flops += op.flops;
    c.bytes += op.bytes;
    c.est_ms += op.ms;
    c.memory_bytes += (numel(op.out) + op.temp) * 4;
    for (const Shape& extra : op.extras) c.memory_bytes += numel(extra) * 4;
    shape = op.out;
  }
  c.batch = batch;
  return Status::ok();
}

// Solves the batch for the window (or takes --batch) and evaluates the chain there.
Status Composer::finish(Composition& c, Rng& rng) const {
  c.min_torch = catalog_.torch_floor;
  for (const PlacedOp& op : c.ops) {
    const std::string& need = catalog_.ops[static_cast<std::size_t>(op.entry)].min_torch;
    if (!need.empty() && compare_versions(need, c.min_torch) > 0) c.min_torch = need;
  }
  if (settings_.batch > 0) {
    if (auto s = evaluate_chain(c, settings_.batch); !s) return s;
    return output_readable(c);
  }

  // Costs and sizes are affine in the batch: read them at 1 and 2.
  Composition at2 = c;
  if (auto s = evaluate_chain(c, 1); !s) return s;
  if (auto s = evaluate_chain(at2, 2); !s) return s;
  struct Line { double base, slope; };
  std::vector<Line> flops, bytes;
  std::vector<Line> tensors;  // every tensor's element count
  for (std::size_t i = 0; i < c.ops.size(); ++i) {
    const PlacedOp &a = c.ops[i], &b = at2.ops[i];
    flops.push_back({a.flops, b.flops - a.flops});
    bytes.push_back({a.bytes, b.bytes - a.bytes});
    tensors.push_back({numel(a.out), numel(b.out) - numel(a.out)});
    tensors.push_back({a.temp, b.temp - a.temp});
    for (std::size_t k = 0; k < a.extras.size(); ++k) {
      tensors.push_back({numel(a.extras[k]), numel(b.extras[k]) - numel(a.extras[k])});
    }
  }
  tensors.push_back({numel(c.ops.front().in), numel(at2.ops.front().in) - numel(c.ops.front().in)});
  const Line memory{c.memory_bytes, at2.memory_bytes - c.memory_bytes};
  auto time_at = [&](double batch) {
    double total = 0;
    for (std::size_t i = 0; i < c.ops.size(); ++i) {
      const OpEntry& entry = catalog_.ops[static_cast<std::size_t>(c.ops[i].entry)];
      total += op_ms(entry, flops[i].base + flops[i].slope * (batch - 1),
                     bytes[i].base + bytes[i].slope * (batch - 1));
    }
    return total;
  };
  // The batch range: the start shape's, then the memory cap and the element cap.
  const StartShape& start = catalog_.starts[static_cast<std::size_t>(c.start)];
  std::int64_t lo = start.batch_lo, hi = start.batch_hi;
  if (settings_.max_dim > 0) hi = std::min(hi, std::max<std::int64_t>(1, settings_.max_dim));
  lo = std::min(lo, hi);
  auto cap = [&](const Line& line, double limit) {
    if (line.slope <= 0) return std::numeric_limits<std::int64_t>::max();
    const double batches = std::floor((limit - line.base) / line.slope) + 1;
    return static_cast<std::int64_t>(std::clamp(batches, -1.0, 1e15));
  };
  hi = std::min(hi, cap(memory, settings_.memory_bytes));
  for (const Line& t : tensors) hi = std::min(hi, cap(t, static_cast<double>(kMaxElements)));
  const Line output{numel(c.ops.back().out), numel(at2.ops.back().out) - numel(c.ops.back().out)};
  hi = std::min(hi, cap(output, static_cast<double>(kMaxOutputElements)));
  if (hi < lo) return Status::error("too large even at the smallest batch");
  const double log_lo = std::log(settings_.window_lo_ms), log_hi = std::log(settings_.window_hi_ms);
  const double target = std::exp(log_lo + rng.uniform() * (log_hi - log_lo));
  std::int64_t a = lo, b = hi;  // smallest batch whose time reaches the target, or hi
  while (a < b) {
    const std::int64_t mid = a + (b - a) / 2;
    if (time_at(static_cast<double>(mid)) >= target) b = mid;
    else a = mid + 1;
  }
  // The round batch nearest the target time (in log time) among the neighbours of the solution.
  std::int64_t batch = a;
  double best = std::numeric_limits<double>::infinity();
  for (std::int64_t candidate : {round_size(a), round_size(std::max(lo, a - 1)), round_size(a + a / 8),
                                 round_size(std::max(lo, a - a / 8))}) {
    if (candidate < lo || candidate > hi) continue;
    const double miss = std::fabs(std::log(time_at(static_cast<double>(candidate)) / target));
    if (miss < best) {
      best = miss;
      batch = candidate;
    }
  }
  const Composition at1 = c;
  if (auto s = evaluate_chain(c, batch); !s) return s;
  for (std::size_t i = 0; i < c.ops.size(); ++i) {  // the batch must not change any other dim
    if (!std::equal(c.ops[i].out.begin() + 1, c.ops[i].out.end(), at1.ops[i].out.begin() + 1,
                    at1.ops[i].out.end())) {
      return Status::error(catalog_.ops[static_cast<std::size_t>(c.ops[i].entry)].name +
                           ": its output shape depends on the batch");
    }
  }
  if (c.est_ms < settings_.window_lo_ms || c.est_ms > settings_.window_hi_ms) {
    char buffer[96];
    std::snprintf(buffer, sizeof buffer, "estimated %.3g ms at batch %lld, outside the window",
                  c.est_ms, static_cast<long long>(batch));
    return Status::error(buffer);
  }
  if (c.memory_bytes > settings_.memory_bytes) return Status::error("over the memory cap");
  return output_readable(c);
}

Status Composer::try_random(int depth, Rng& rng, Composition& out) const {
  out = Composition{};
  Shape shape;
  for (int position = 0; position < depth; ++position) {
    const bool last = position == depth - 1;
    // Candidates: the allowed operators that accept the current tensor here.
    std::vector<int> candidates;
    for (int index : allowed_) {
      const OpEntry& e = catalog_.ops[static_cast<std::size_t>(index)];
      if (e.terminal && !last) continue;
      if (position == 0) {
        if (depth == 1 && !e.standalone) continue;
      } else {
        const auto rank = static_cast<int>(shape.size());
        if (e.rank != 0 ? rank != e.rank : rank < e.min_rank) continue;
      }
      candidates.push_back(index);
    }
    // Avoid repeating the operator just placed when anything else fits.
    if (position > 0 && candidates.size() > 1) {
      const int previous = out.ops.back().entry;
      std::erase(candidates, previous);
    }
    if (candidates.empty()) {
      return Status::error("no allowed operator accepts " + shape_text(shape) + " at position " +
                           std::to_string(position + 1));
    }
    Status last_failure = Status::ok();
    bool placed = false;
    for (int pick = 0; pick < kOperatorPicks && !placed; ++pick) {
      double total = 0;
      for (int index : candidates) total += catalog_.ops[static_cast<std::size_t>(index)].weight;
      double u = rng.uniform() * total;
      int chosen = candidates.back();
      for (int index : candidates) {
        u -= catalog_.ops[static_cast<std::size_t>(index)].weight;
        if (u < 0) {
          chosen = index;
          break;
        }
      }
      const OpEntry& entry = catalog_.ops[static_cast<std::size_t>(chosen)];
      Shape in = shape;
      if (position == 0) {
        if (auto s = draw_start(entry, rng, in, out.start); !s) return s;
      }
      PlacedOp op;
      last_failure = place(chosen, in, rng, nullptr, op);
      if (last_failure) {
        if (position == 0) out.start_dims.assign(in.begin() + 1, in.end());
        shape = op.out;
        out.ops.push_back(std::move(op));
        placed = true;
      }
    }
    if (!placed) return last_failure;
  }
  return finish(out, rng);
}

Status Composer::try_chain(const std::vector<OpRequest>& chain, Rng& rng, Composition& out) const {
  out = Composition{};
  Shape shape;
  for (std::size_t position = 0; position < chain.size(); ++position) {
    const OpRequest& request = chain[position];
    const OpEntry& entry = catalog_.ops[static_cast<std::size_t>(request.entry)];
    if (entry.terminal && position + 1 != chain.size()) {
      return Status::error(entry.name + ": can only be the last operator");
    }
    Shape in = shape;
    if (position == 0) {
      if (auto s = draw_start(entry, rng, in, out.start); !s) return s;
    }
    PlacedOp op;
    if (auto s = place(request.entry, in, rng, &request.params, op); !s) {
      return Status::error("operator " + std::to_string(position + 1) + " " + s.message());
    }
    if (position == 0) out.start_dims.assign(in.begin() + 1, in.end());
    shape = op.out;
    out.ops.push_back(std::move(op));
  }
  return finish(out, rng);
}

Result<Composition> Composer::compose(std::uint64_t seed, std::uint64_t index) const {
  Rng rng(seed, index);
  const int depth = draw_depth(rng);
  Composition c;
  Status last = Status::ok();
  for (int attempt = 0; attempt < settings_.attempts; ++attempt) {
    last = try_random(depth, rng, c);
    if (last) return c;
  }
  return Status::error("no composition of depth " + std::to_string(depth) + " in " +
                       std::to_string(settings_.attempts) + " attempts; the last: " + last.message());
}

Result<Composition> Composer::compose_chain(const std::vector<OpRequest>& chain, std::uint64_t seed,
                                            std::uint64_t index) const {
  if (chain.empty()) return Status::error("the composition is empty");
  // Overrides are checked once, up front: a value the entry rejects fails every attempt alike.
  for (std::size_t position = 0; position < chain.size(); ++position) {
    const OpEntry& entry = catalog_.ops[static_cast<std::size_t>(chain[position].entry)];
    for (const ParamOverride& o : chain[position].params) {
      auto spec = std::find_if(entry.params.begin(), entry.params.end(),
                               [&](const ParamSpec& p) { return p.name == o.name; });
      const std::string where = "operator " + std::to_string(position + 1) + " " + entry.name + ": ";
      if (spec == entry.params.end()) return Status::error(where + "has no parameter '" + o.name + "'");
      if (auto value = override_value(*spec, o); !value) return Status::error(where + value.status().message());
    }
  }
  Rng rng(seed, index);
  Composition c;
  Status last = Status::ok();
  for (int attempt = 0; attempt < settings_.attempts; ++attempt) {
    last = try_chain(chain, rng, c);
    if (last) return c;
  }
  return last;
}

}  // namespace cudaagent::synth
