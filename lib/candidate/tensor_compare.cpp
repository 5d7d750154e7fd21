// Output comparison in two passes: the whole structure first (so a wrong dtype is reported as such,
// not as a million value errors), then values with one tight loop per dtype, instantiated from a
// template, so a 100M-element tensor costs one pass of loads and compares and no call per element.
#include "cudaagent/candidate/tensor_compare.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#if defined(__FAST_MATH__)
#error "the comparator relies on IEEE NaN and Inf semantics; do not build it with -ffast-math"
#endif

namespace cudaagent {

static_assert(std::endian::native == std::endian::little, "tensor files hold little-endian elements");

namespace {

constexpr std::uint64_t kNoIndex = std::numeric_limits<std::uint64_t>::max();
constexpr double kInfinity = std::numeric_limits<double>::infinity();

template <class T>
T load(const std::byte* base, std::uint64_t index) {
  T value;
  std::memcpy(&value, base + index * sizeof(T), sizeof(T));  // tensors need not be aligned
  return value;
}

// Decoders are constructed once per loop, so any setup (the half table) stays out of it.
struct Float32 {
  static double at(const std::byte* p, std::uint64_t i) { return static_cast<double>(load<float>(p, i)); }
};
struct Float64 {
  static double at(const std::byte* p, std::uint64_t i) { return load<double>(p, i); }
};
// Half decoding branches on the exponent class, which mispredicts on real data; a 256 KiB table of
// every pattern (built once, immutable, thread-safe initialisation) turns it into one load.
const float* float16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> values(65536);
    for (std::uint32_t bits = 0; bits < 65536; ++bits) {
      values[bits] = static_cast<float>(float16_to_double(static_cast<std::uint16_t>(bits)));
    }
    return values;
  }();
  return table.data();
}

struct Float16 {
  const float* table = float16_table();
  double at(const std::byte* p, std::uint64_t i) const {
    return static_cast<double>(table[load<std::uint16_t>(p, i)]);
  }
};
struct BFloat16 {
  static double at(const std::byte* p, std::uint64_t i) {
    return bfloat16_to_double(load<std::uint16_t>(p, i));
  }
};

// What one tensor's (or scalar's) element loop found.
struct ElementStats {
  std::uint64_t mismatched = 0;
  std::uint64_t first_bad = kNoIndex;
  double max_abs = 0.0;
  double max_rel = 0.0;
  double worst_excess = -kInfinity;
  std::uint64_t worst_index = kNoIndex;

  void mismatch(std::uint64_t i) {
    if (mismatched++ == 0) first_bad = i;
  }
  void exact_mismatch(std::uint64_t i) {
    mismatch(i);
    if (worst_excess < kInfinity) {
      worst_excess = kInfinity;
      worst_index = i;
    }
  }
};

// The allclose rule for one pair, written so any NaN fails the finite branch and infinities are
// never "close": tol is infinite when e is, which would otherwise accept any finite a.
inline void compare_pair(double e, double a, std::uint64_t i, double atol, double rtol, ElementStats& s) {
  if (std::isfinite(e) && std::isfinite(a)) {
    const double diff = std::fabs(a - e);
    const double magnitude = std::fabs(e);
    const double tolerance = atol + rtol * magnitude;
    if (diff > s.max_abs) s.max_abs = diff;
    if (magnitude != 0.0 && diff > s.max_rel * magnitude) s.max_rel = diff / magnitude;
    const double excess = diff - tolerance;
    if (excess > s.worst_excess) {
      s.worst_excess = excess;
      s.worst_index = i;
    }
    if (!(diff <= tolerance)) s.mismatch(i);
  } else if (!(a == e || (std::isnan(a) && std::isnan(e)))) {
    s.exact_mismatch(i);
  }
}

template <class Decoder>
ElementStats compare_floats(const std::byte* e, const std::byte* a, std::uint64_t n, double atol,
                            double rtol, bool stop_at_mismatch) {
  ElementStats s;
  const Decoder decode;
  for (std::uint64_t i = 0; i < n; ++i) {
    compare_pair(decode.at(e, i), decode.at(a, i), i, atol, rtol, s);
    if (stop_at_mismatch && s.mismatched != 0) break;
  }
  return s;
}

template <class T>
ElementStats compare_exact(const std::byte* e, const std::byte* a, std::uint64_t n,
                           bool stop_at_mismatch) {
  ElementStats s;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (load<T>(e, i) != load<T>(a, i)) {
      s.exact_mismatch(i);
      if (stop_at_mismatch) break;
    }
  }
  return s;
}

// Integers widen to int64 and bools read as their raw byte, so a bool byte of 2 differs from 1.
std::int64_t integer_at(const TensorTree& t, std::uint64_t i) {
  const std::byte* p = t.data.get();
  switch (t.dtype) {
    case DType::kInt8:
      return load<std::int8_t>(p, i);
    case DType::kInt16:
      return load<std::int16_t>(p, i);
    case DType::kInt32:
      return load<std::int32_t>(p, i);
    case DType::kInt64:
      return load<std::int64_t>(p, i);
    case DType::kUInt8:
    case DType::kBool:
      return load<std::uint8_t>(p, i);
    default:
      return 0;
  }
}

double floating_at(const TensorTree& t, std::uint64_t i) {
  const std::byte* p = t.data.get();
  switch (t.dtype) {
    case DType::kFloat32:
      return Float32::at(p, i);
    case DType::kFloat64:
      return Float64::at(p, i);
    case DType::kFloat16:
      return float16_to_double(load<std::uint16_t>(p, i));
    case DType::kBFloat16:
      return BFloat16::at(p, i);
    default:
      return 0.0;
  }
}

ElementStats compare_elements(const TensorTree& e, const TensorTree& a, const ElementTolerance& t,
                              bool stop) {
  const std::byte* pe = e.data.get();
  const std::byte* pa = a.data.get();
  const std::uint64_t n = e.numel();
  switch (e.dtype) {
    case DType::kFloat32:
      return compare_floats<Float32>(pe, pa, n, t.absolute, t.relative, stop);
    case DType::kFloat64:
      return compare_floats<Float64>(pe, pa, n, t.absolute, t.relative, stop);
    case DType::kFloat16:
      return compare_floats<Float16>(pe, pa, n, t.absolute, t.relative, stop);
    case DType::kBFloat16:
      return compare_floats<BFloat16>(pe, pa, n, t.absolute, t.relative, stop);
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return compare_exact<std::uint8_t>(pe, pa, n, stop);
    case DType::kInt16:
      return compare_exact<std::uint16_t>(pe, pa, n, stop);
    case DType::kInt32:
      return compare_exact<std::uint32_t>(pe, pa, n, stop);
    case DType::kInt64:
      return compare_exact<std::uint64_t>(pe, pa, n, stop);
  }
  return {};
}

// The mean of |v| over the finite elements (0 when there are none): the scale S of the rule in
// tensor_compare.h. Summed in double, which holds the sum of a billion float32 magnitudes far more
// precisely than a tolerance needs.
template <class Decoder>
double mean_magnitude(const std::byte* p, std::uint64_t n) {
  const Decoder decode;
  double sum = 0.0;
  std::uint64_t finite = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const double v = decode.at(p, i);
    if (std::isfinite(v)) {
      sum += std::fabs(v);
      ++finite;
    }
  }
  return finite == 0 ? 0.0 : sum / static_cast<double>(finite);
}

// The spacing of floating-point numbers at 1 (machine epsilon) of the half-precision dtypes, whose
// rounding the tolerance must absorb; 0 for float32 and float64, where it never matters and a zero
// tolerance must stay exact.
double rounding_floor_epsilon(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return 0x1p-7;
    case DType::kFloat16:
      return 0x1p-10;
    default:
      return 0.0;
  }
}

// Whether every element equals the first (NaN equal to NaN, -0 to +0). Stops at the first
// difference, so a varying tensor costs a few loads.
template <class Decoder>
bool constant_floats(const std::byte* p, std::uint64_t n) {
  if (n == 0) return true;
  const Decoder decode;
  const double first = decode.at(p, 0);
  const bool first_nan = std::isnan(first);
  for (std::uint64_t i = 1; i < n; ++i) {
    const double v = decode.at(p, i);
    if (!(v == first || (first_nan && std::isnan(v)))) return false;
  }
  return true;
}

bool is_constant(const TensorTree& t) {
  const std::byte* p = t.data.get();
  const std::uint64_t n = t.numel();
  switch (t.dtype) {
    case DType::kFloat32:
      return constant_floats<Float32>(p, n);
    case DType::kFloat64:
      return constant_floats<Float64>(p, n);
    case DType::kFloat16:
      return constant_floats<Float16>(p, n);
    case DType::kBFloat16:
      return constant_floats<BFloat16>(p, n);
    default:
      break;
  }
  const std::size_t size = dtype_size(t.dtype);
  for (std::uint64_t i = 1; i < n; ++i) {
    if (std::memcmp(p, p + i * size, size) != 0) return false;
  }
  return true;
}

std::string number_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return ec == std::errc() ? std::string(buffer, end) : "?";
}

std::string element_text(const TensorTree& t, std::uint64_t i) {
  return dtype_is_floating(t.dtype) ? number_text(floating_at(t, i)) : std::to_string(integer_at(t, i));
}

// " at (3, 17)" for element 3*N+17 of an (M, N) tensor; nothing for a 0-d tensor or a scalar.
std::string index_text(const std::vector<std::int64_t>& shape, std::uint64_t flat) {
  if (shape.empty()) return "";
  std::vector<std::uint64_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    const auto extent = static_cast<std::uint64_t>(shape[d]);
    index[d] = extent == 0 ? 0 : flat % extent;
    flat = extent == 0 ? 0 : flat / extent;
  }
  std::string text = " at (";
  for (std::size_t d = 0; d < index.size(); ++d) text += (d ? ", " : "") + std::to_string(index[d]);
  return text + ")";
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

std::string describe_kind(const TensorTree& t) {
  if (t.kind == ValueKind::kOther) return "other (" + quote_for_message(t.python_type) + ")";
  return std::string(kind_name(t.kind));
}

// A tensor the comparator may read: its byte count agrees with shape and dtype.
bool tensor_is_sound(const TensorTree& t) {
  std::uint64_t total = dtype_size(t.dtype);
  for (std::int64_t dim : t.shape) {
    if (dim < 0 || __builtin_mul_overflow(total, static_cast<std::uint64_t>(dim), &total)) return false;
  }
  return total == t.nbytes && (t.nbytes == 0 || t.data != nullptr);
}

constexpr std::size_t kNoKey = std::numeric_limits<std::size_t>::max();

// For each key of `from`, its index among the keys of `to`, or kNoKey. Sorting keeps a dict of
// thousands of keys in adversarial order at n log n.
std::vector<std::size_t> dict_partners(const TensorTree& from, const TensorTree& to) {
  std::vector<std::size_t> order(to.keys.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t x, std::size_t y) { return to.keys[x] < to.keys[y]; });
  std::vector<std::size_t> partner(from.keys.size(), kNoKey);
  for (std::size_t i = 0; i < from.keys.size(); ++i) {
    auto it = std::lower_bound(order.begin(), order.end(), from.keys[i],
                               [&](std::size_t x, const std::string& key) { return to.keys[x] < key; });
    if (it != order.end() && to.keys[*it] == from.keys[i]) partner[i] = *it;
  }
  return partner;
}

class Comparator {
 public:
  Comparator(const CompareOptions& options, CompareResult& result) : options_(options), result_(result) {}

  // Pass 1. Returns false at the first difference, with the result's reason and failure set.
  bool structure(const TensorTree& e, const TensorTree& a, std::string& path) {
    if (e.kind == ValueKind::kOther) {
      return fail(CompareFailure::kUncomparable, path + ": the expected value has type " +
                                                     quote_for_message(e.python_type) +
                                                     ", which cannot be compared");
    }
    if (a.kind == ValueKind::kOther) {
      return fail(CompareFailure::kType, path + ": " + describe_kind(a) + ", expected " + describe_kind(e));
    }
    if (e.kind != a.kind) {
      return fail(CompareFailure::kFormat, path + ": " + describe_kind(a) + ", expected " + describe_kind(e));
    }
    switch (e.kind) {
      case ValueKind::kTensor:
        return tensor_structure(e, a, path);
      case ValueKind::kTuple:
      case ValueKind::kList: {
        if (e.items.size() != a.items.size()) {
          return fail(CompareFailure::kFormat, path + ": " + describe_kind(a) + " of " +
                                                   std::to_string(a.items.size()) + " items, expected " +
                                                   std::to_string(e.items.size()));
        }
        for (std::size_t i = 0; i < e.items.size(); ++i) {
          const std::size_t saved = path.size();
          path += "[" + std::to_string(i) + "]";
          if (!structure(e.items[i], a.items[i], path)) return false;
          path.resize(saved);
        }
        return true;
      }
      case ValueKind::kDict:
        return dict_structure(e, a, path);
      default:
        return true;  // scalars: the kind is the whole structure
    }
  }

  // Pass 2, on trees whose structure matched.
  void values(const TensorTree& e, const TensorTree& a, std::string& path) {
    if (options_.stop_at_first_mismatch && result_.failure != CompareFailure::kNone) return;
    switch (e.kind) {
      case ValueKind::kTensor:
        tensor_values(e, a, path);
        return;
      case ValueKind::kTuple:
      case ValueKind::kList:
        for (std::size_t i = 0; i < e.items.size(); ++i) {
          const std::size_t saved = path.size();
          path += "[" + std::to_string(i) + "]";
          values(e.items[i], a.items[i], path);
          path.resize(saved);
        }
        return;
      case ValueKind::kDict: {
        const std::vector<std::size_t> partner = dict_partners(e, a);
        for (std::size_t i = 0; i < e.items.size(); ++i) {
          const std::size_t saved = path.size();
          append_path_key(path, e.keys[i]);
          values(e.items[i], a.items[partner[i]], path);
          path.resize(saved);
        }
        return;
      }
      case ValueKind::kInt:
        scalar_exact(e.int_value == a.int_value, std::to_string(a.int_value), std::to_string(e.int_value),
                     path);
        return;
      case ValueKind::kBool:
        scalar_exact(e.bool_value == a.bool_value, a.bool_value ? "true" : "false",
                     e.bool_value ? "true" : "false", path);
        return;
      case ValueKind::kFloat:
        scalar_float(e, a.float_value, path);
        return;
      case ValueKind::kNone:
      case ValueKind::kOther:
        return;
    }
  }

 private:
  bool fail(CompareFailure failure, std::string reason) {
    result_.failure = failure;
    result_.reason = std::move(reason);
    return false;
  }

  void fail_values(CompareFailure failure, const std::string& reason) {
    if (result_.failure != CompareFailure::kNone) return;  // keep the first
    result_.failure = failure;
    result_.reason = reason;
  }

  bool tensor_structure(const TensorTree& e, const TensorTree& a, const std::string& path) {
    if (e.python_type != a.python_type) {
      return fail(CompareFailure::kType, path + ": python_type " + quote_for_message(a.python_type) +
                                             ", expected " + quote_for_message(e.python_type));
    }
    if (e.dtype != a.dtype) {
      return fail(CompareFailure::kFormat, path + ": dtype " + std::string(dtype_name(a.dtype)) +
                                               ", expected " + std::string(dtype_name(e.dtype)));
    }
    if (e.device != a.device) {
      return fail(CompareFailure::kFormat, path + ": device " + std::string(device_name(a.device)) +
                                               ", expected " + std::string(device_name(e.device)));
    }
    if (e.shape != a.shape) {
      return fail(CompareFailure::kFormat,
                  path + ": shape " + shape_text(a.shape) + ", expected " + shape_text(e.shape));
    }
    if (!tensor_is_sound(e) || !tensor_is_sound(a)) {
      return fail(CompareFailure::kFormat, path + ": tensor bytes do not match its shape and dtype");
    }
    return true;
  }

  // Keys compared as sets (Python dict equality ignores order); pairs recurse in expected's order.
  bool dict_structure(const TensorTree& e, const TensorTree& a, std::string& path) {
    if (e.keys.size() != e.items.size() || a.keys.size() != a.items.size()) {
      return fail(CompareFailure::kFormat, path + ": dict keys and items differ in number");
    }
    const std::vector<std::size_t> partner = dict_partners(e, a);
    for (std::size_t i = 0; i < e.keys.size(); ++i) {
      if (partner[i] == kNoKey) {
        return fail(CompareFailure::kFormat, path + ": key " + quote_for_message(e.keys[i]) + " missing");
      }
    }
    if (a.keys.size() != e.keys.size()) {
      const std::vector<std::size_t> back = dict_partners(a, e);
      for (std::size_t i = 0; i < a.keys.size(); ++i) {
        if (back[i] == kNoKey) {
          return fail(CompareFailure::kFormat, path + ": unexpected key " + quote_for_message(a.keys[i]));
        }
      }
      return fail(CompareFailure::kFormat, path + ": dict keys are not unique");
    }
    for (std::size_t i = 0; i < e.items.size(); ++i) {
      const std::size_t saved = path.size();
      append_path_key(path, e.keys[i]);
      if (!structure(e.items[i], a.items[partner[i]], path)) return false;
      path.resize(saved);
    }
    return true;
  }

  void tensor_values(const TensorTree& e, const TensorTree& a, const std::string& path) {
    const std::uint64_t n = e.numel();
    result_.compared_elements += n;
    if (options_.reject_degenerate && is_constant(a) && !is_constant(e)) {
      const double first =
          dtype_is_floating(a.dtype) ? floating_at(a, 0) : static_cast<double>(integer_at(a, 0));
      std::string what = first == 0.0        ? "all zeros"
                         : std::isnan(first) ? "all NaN"
                                             : "constant " + element_text(a, 0);
      fail_values(CompareFailure::kDegenerate, path + ": degenerate output: " + what + " (" +
                                                   std::to_string(n) +
                                                   " elements) where the expected values vary");
    }
    const ElementTolerance tolerance = element_tolerance(e, options_);
    const ElementStats s = compare_elements(e, a, tolerance, options_.stop_at_first_mismatch);
    absorb(s, path, e.shape);
    if (s.mismatched != 0) {
      const bool floating = dtype_is_floating(e.dtype);
      const std::string count = options_.stop_at_first_mismatch
                                    ? "elements differ (compared up to the first)"
                                    : std::to_string(s.mismatched) + " of " + std::to_string(n) +
                                          " elements differ";
      std::string reason = path + ": " + count + "; first" + index_text(e.shape, s.first_bad) + ": got " +
                           element_text(a, s.first_bad) + ", expected " + element_text(e, s.first_bad);
      if (floating) {
        reason += tolerance_note(floating_at(e, s.first_bad), floating_at(a, s.first_bad), tolerance);
      }
      fail_values(CompareFailure::kValues, reason);
    }
  }

  void scalar_float(const TensorTree& expected, double a, const std::string& path) {
    const double e = expected.float_value;
    const ElementTolerance tolerance = element_tolerance(expected, options_);
    ElementStats s;
    compare_pair(e, a, 0, tolerance.absolute, tolerance.relative, s);
    result_.compared_elements += 1;
    absorb(s, path, {});
    if (s.mismatched != 0) {
      fail_values(CompareFailure::kValues, path + ": got " + number_text(a) + ", expected " +
                                               number_text(e) + tolerance_note(e, a, tolerance));
    }
  }

  void scalar_exact(bool equal, const std::string& got, const std::string& expected,
                    const std::string& path) {
    ElementStats s;
    if (!equal) s.exact_mismatch(0);
    result_.compared_elements += 1;
    absorb(s, path, {});
    if (!equal) fail_values(CompareFailure::kValues, path + ": got " + got + ", expected " + expected);
  }

  static std::string tolerance_note(double e, double a, const ElementTolerance& tolerance) {
    if (!std::isfinite(e) || !std::isfinite(a)) return " (NaN and infinities must match exactly)";
    return " (|diff| " + number_text(std::fabs(a - e)) + " > tolerance " +
           number_text(tolerance.absolute + tolerance.relative * std::fabs(e)) + ")";
  }

  void absorb(const ElementStats& s, const std::string& path, const std::vector<std::int64_t>& shape) {
    result_.mismatched_elements += s.mismatched;
    result_.max_abs_error = std::max(result_.max_abs_error, s.max_abs);
    result_.max_rel_error = std::max(result_.max_rel_error, s.max_rel);
    if (s.worst_index != kNoIndex && (s.worst_excess > worst_excess_ || result_.worst_path.empty())) {
      worst_excess_ = s.worst_excess;
      result_.worst_path = path + index_text(shape, s.worst_index);
    }
  }

  const CompareOptions& options_;
  CompareResult& result_;
  double worst_excess_ = -kInfinity;
};

bool bytes_equal(const TensorTree& a, const TensorTree& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case ValueKind::kTensor:
      if (a.python_type != b.python_type || a.dtype != b.dtype || a.device != b.device ||
          a.shape != b.shape || a.nbytes != b.nbytes || !tensor_is_sound(a) || !tensor_is_sound(b)) {
        return false;
      }
      return a.nbytes == 0 || std::memcmp(a.data.get(), b.data.get(), a.nbytes) == 0;
    case ValueKind::kTuple:
    case ValueKind::kList:
    case ValueKind::kDict:
      if (a.items.size() != b.items.size() || a.keys != b.keys) return false;
      for (std::size_t i = 0; i < a.items.size(); ++i) {
        if (!bytes_equal(a.items[i], b.items[i])) return false;
      }
      return true;
    case ValueKind::kInt:
      return a.int_value == b.int_value;
    case ValueKind::kFloat:
      return std::bit_cast<std::uint64_t>(a.float_value) == std::bit_cast<std::uint64_t>(b.float_value);
    case ValueKind::kBool:
      return a.bool_value == b.bool_value;
    case ValueKind::kNone:
      return true;
    case ValueKind::kOther:
      return a.python_type == b.python_type;
  }
  return false;
}

}  // namespace

ElementTolerance element_tolerance(const TensorTree& expected, const CompareOptions& options) {
  if (!options.scale_atol) return {options.atol, options.rtol};
  double scale = 0.0;
  DType dtype = DType::kFloat64;
  if (expected.kind == ValueKind::kFloat) {
    scale = std::isfinite(expected.float_value) ? std::fabs(expected.float_value) : 0.0;
  } else if (expected.kind == ValueKind::kTensor && dtype_is_floating(expected.dtype) &&
             tensor_is_sound(expected)) {
    dtype = expected.dtype;
    const std::byte* p = expected.data.get();
    const std::uint64_t n = expected.numel();
    switch (dtype) {
      case DType::kFloat32:
        scale = mean_magnitude<Float32>(p, n);
        break;
      case DType::kFloat64:
        scale = mean_magnitude<Float64>(p, n);
        break;
      case DType::kFloat16:
        scale = mean_magnitude<Float16>(p, n);
        break;
      default:
        scale = mean_magnitude<BFloat16>(p, n);
        break;
    }
  } else {
    return {options.atol, options.rtol};  // integers and bools compare exactly anyway
  }
  const double epsilon = rounding_floor_epsilon(dtype);
  return {std::max(options.atol * std::min(1.0, scale), 2 * epsilon * scale),
          std::max(options.rtol, epsilon)};
}

double float16_to_double(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return static_cast<double>(sign ? -magnitude : magnitude);
  }
  // Infinity and NaN keep an all-ones exponent (and the payload); normals re-bias 15 -> 127.
  const std::uint32_t out_exponent = exponent == 0x1fu ? 0xffu : exponent + (127 - 15);
  return static_cast<double>(std::bit_cast<float>(sign | (out_exponent << 23) | (mantissa << 13)));
}

double bfloat16_to_double(std::uint16_t bits) {
  // bfloat16 is the top half of a float32.
  return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16));
}

CompareResult compare_outputs(const TensorTree& expected, const TensorTree& actual,
                              const CompareOptions& options) {
  CompareResult result;
  Comparator comparator(options, result);
  std::string path = "output";
  if (!comparator.structure(expected, actual, path)) return result;
  path = "output";
  comparator.values(expected, actual, path);
  result.match = result.failure == CompareFailure::kNone;
  return result;
}

bool tensors_bytes_equal(const TensorTree& a, const TensorTree& b) { return bytes_equal(a, b); }

}  // namespace cudaagent
