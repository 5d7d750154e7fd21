// The comparator against the output tricks of the attack catalog (cases 11-17): format first, then
// values with exact tolerance boundaries, NaN/Inf classes, degenerate outputs and half decoding.
#include "cudaagent/candidate/tensor_compare.h"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using cudaagent::CompareFailure;
using cudaagent::CompareOptions;
using cudaagent::CompareResult;
using cudaagent::Device;
using cudaagent::DType;
using cudaagent::TensorTree;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <class T>
TensorTree tensor_of(DType dtype, std::vector<std::int64_t> shape, const std::vector<T>& values,
                     Device device = Device::kCuda) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return TensorTree::tensor(dtype, std::move(shape), std::move(bytes), device);
}

TensorTree f32(std::vector<float> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return tensor_of<float>(DType::kFloat32, {n}, values);
}

TensorTree f64(std::vector<double> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return tensor_of<double>(DType::kFloat64, {n}, values);
}

CompareResult compare(const TensorTree& expected, const TensorTree& actual, CompareOptions options = {}) {
  return cudaagent::compare_outputs(expected, actual, options);
}

}  // namespace

TEST_CASE("identical outputs match with zero error") {
  const TensorTree out = TensorTree::tuple({f32({1, 2, 3}), TensorTree::integer(4), TensorTree::floating(0.5),
                                            TensorTree::boolean(true), TensorTree::none()});
  const CompareResult result = compare(out, out);
  CHECK(result.match);
  CHECK(result.failure == CompareFailure::kNone);
  CHECK(result.reason.empty());
  CHECK(result.max_abs_error == 0.0);
  CHECK(result.mismatched_elements == 0);
  CHECK(result.compared_elements == 6);  // 3 elements and 3 scalars; None has no value
}

TEST_CASE("values within tolerance match and report their error") {
  const CompareResult result = compare(f32({1, 2, 100}), f32({1.01f, 2, 100.5f}));
  CHECK(result.match);
  CHECK(result.max_abs_error == doctest::Approx(0.5));
  CHECK(result.max_rel_error == doctest::Approx(0.01));
  // Nearest its tolerance: 0.01 of 0.02 at index 0, where index 2 uses 0.5 of 1.01.
  CHECK(result.worst_path == "output at (0)");
}

TEST_CASE("the tolerance boundary atol + rtol*|e| is inclusive, and one ulp past it fails") {
  // Powers of two keep every step exact: tolerance at |e| = 2 is 0.25 + 0.25 * 2 = 0.75.
  const CompareOptions options{0.25, 0.25, false};
  for (double e : {2.0, -2.0}) {
    CAPTURE(e);
    CHECK(compare(f64({e}), f64({e + 0.75}), options).match);
    CHECK(compare(f64({e}), f64({e - 0.75}), options).match);
    CHECK_FALSE(compare(f64({e}), f64({std::nextafter(e + 0.75, kInf)}), options).match);
    CHECK_FALSE(compare(f64({e}), f64({std::nextafter(e - 0.75, -kInf)}), options).match);
  }
  // The scalar path uses the same rule.
  CHECK(compare(TensorTree::floating(2.0), TensorTree::floating(2.75), options).match);
  CHECK_FALSE(
      compare(TensorTree::floating(2.0), TensorTree::floating(std::nextafter(2.75, kInf)), options).match);
  // Zero tolerance means exact.
  CHECK(compare(f64({1.5}), f64({1.5}), {0, 0, false}).match);
  CHECK_FALSE(compare(f64({1.5}), f64({std::nextafter(1.5, 2.0)}), {0, 0, false}).match);
}

TEST_CASE("NaN and infinities must match class by class, position by position") {
  struct Case {
    double expected, actual;
    bool match;
  };
  const Case cases[] = {
      {kNaN, kNaN, true},   {kNaN, 1.0, false},   {1.0, kNaN, false},   {kInf, kInf, true},
      {-kInf, -kInf, true}, {kInf, -kInf, false}, {-kInf, kInf, false}, {kInf, 1e300, false},
      {1e300, kInf, false}, {kInf, kNaN, false},  {kNaN, -kInf, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.expected);
    CAPTURE(c.actual);
    CHECK(compare(f64({0.5, c.expected}), f64({0.5, c.actual})).match == c.match);
    CHECK(compare(TensorTree::floating(c.expected), TensorTree::floating(c.actual)).match == c.match);
  }
  // A tolerance large enough to swallow everything still never makes an infinity "close".
  const CompareOptions huge{1e308, 1e308, false};
  CHECK_FALSE(compare(f64({kInf}), f64({1.0}), huge).match);
  CHECK_FALSE(compare(f64({1.0}), f64({kInf}), huge).match);
  const CompareResult result = compare(f32({1, NAN, 3}), f32({1, 2, 3}));
  CHECK(result.failure == CompareFailure::kValues);
  CHECK(result.reason ==
        "output: 1 of 3 elements differ; first at (1): got 2, expected nan "
        "(NaN and infinities must match exactly)");
  CHECK(result.worst_path == "output at (1)");
}

TEST_CASE("format mismatches fail before any value is compared") {
  struct Case {
    const char* name;
    TensorTree expected, actual;
    CompareFailure failure;
    std::string reason;
  };
  const TensorTree m_by_n = tensor_of<float>(DType::kFloat32, {3, 2}, {1, 2, 3, 4, 5, 6});
  TensorTree subclass = m_by_n;
  subclass.python_type = "model_new.LazyTensor";
  const std::vector<Case> cases = {
      {"dtype", TensorTree::tuple({f32({1}), f32({1})}),
       TensorTree::tuple({f32({1}), tensor_of<std::uint16_t>(DType::kFloat16, {1}, {0x3C00})}),
       CompareFailure::kFormat, "output[1]: dtype float16, expected float32"},
      {"broadcastable shape", m_by_n, tensor_of<float>(DType::kFloat32, {1, 2}, {1, 2}),
       CompareFailure::kFormat, "output: shape [1, 2], expected [3, 2]"},
      {"0-d vs 1-element", tensor_of<float>(DType::kFloat32, {}, {1}), f32({1}), CompareFailure::kFormat,
       "output: shape [1], expected []"},
      {"device", m_by_n, tensor_of<float>(DType::kFloat32, {3, 2}, {1, 2, 3, 4, 5, 6}, Device::kCpu),
       CompareFailure::kFormat, "output: device cpu, expected cuda"},
      {"tuple vs list", TensorTree::tuple({f32({1})}), TensorTree::list({f32({1})}), CompareFailure::kFormat,
       "output: list, expected tuple"},
      {"tuple vs tensor", f32({1}), TensorTree::tuple({f32({1})}), CompareFailure::kFormat,
       "output: tuple, expected tensor"},
      {"length", TensorTree::tuple({f32({1}), f32({1})}), TensorTree::tuple({f32({1})}),
       CompareFailure::kFormat, "output: tuple of 1 items, expected 2"},
      {"subclass", m_by_n, subclass, CompareFailure::kType,
       "output: python_type \"model_new.LazyTensor\", expected \"torch.Tensor\""},
      {"foreign object", m_by_n, TensorTree::other("model_new.AlwaysEqual"), CompareFailure::kType,
       "output: other (\"model_new.AlwaysEqual\"), expected tensor"},
      {"int vs float scalar", TensorTree::floating(1.0), TensorTree::integer(1), CompareFailure::kFormat,
       "output: int, expected float"},
      {"bool vs int scalar", TensorTree::integer(1), TensorTree::boolean(true), CompareFailure::kFormat,
       "output: bool, expected int"},
      {"missing key", TensorTree::dict({{"a", f32({1})}, {"b", f32({1})}}),
       TensorTree::dict({{"a", f32({1})}}), CompareFailure::kFormat, "output: key \"b\" missing"},
      {"extra key", TensorTree::dict({{"a", f32({1})}}),
       TensorTree::dict({{"a", f32({1})}, {"c\n", f32({1})}}), CompareFailure::kFormat,
       "output: unexpected key \"c\\n\""},
      {"nested", TensorTree::dict({{"x", TensorTree::list({TensorTree::none(), f32({1})})}}),
       TensorTree::dict({{"x", TensorTree::list({TensorTree::none(), f64({1})})}}), CompareFailure::kFormat,
       "output[\"x\"][1]: dtype float64, expected float32"},
      {"uncomparable reference", TensorTree::other("torch.return_types.max"),
       TensorTree::other("torch.return_types.max"), CompareFailure::kUncomparable,
       "output: the expected value has type \"torch.return_types.max\", which cannot be compared"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const CompareResult result = compare(c.expected, c.actual);
    CHECK_FALSE(result.match);
    CHECK(result.failure == c.failure);
    CHECK(result.reason == c.reason);
    CHECK(result.compared_elements == 0);
  }
}

TEST_CASE("a format error wins over an earlier value error") {
  const CompareResult result =
      compare(TensorTree::tuple({f32({1}), f32({1})}), TensorTree::tuple({f32({5}), f64({1})}));
  CHECK(result.failure == CompareFailure::kFormat);
  CHECK(result.reason == "output[1]: dtype float64, expected float32");
}

TEST_CASE("dict keys are compared as a set") {
  const TensorTree expected = TensorTree::dict({{"a", f32({1})}, {"b", f32({2})}});
  const TensorTree same_in_other_order = TensorTree::dict({{"b", f32({2})}, {"a", f32({1})}});
  CHECK(compare(expected, same_in_other_order).match);
  const CompareResult wrong = compare(expected, TensorTree::dict({{"b", f32({1})}, {"a", f32({1})}}));
  CHECK(wrong.failure == CompareFailure::kValues);
  CHECK(wrong.reason.rfind("output[\"b\"]: 1 of 1 elements differ", 0) == 0);
}

TEST_CASE("degenerate outputs fail when the reference varies") {
  // All zeros for a reference that varies near 0: a trivial kernel. The degenerate finding is the
  // reason; the scaled tolerance finds the values wrong as well.
  const TensorTree small = f32({0.001f, -0.002f, 0.003f, 0.0f});
  CompareResult result = compare(small, f32({0, 0, -0.0f, 0}));
  CHECK(result.failure == CompareFailure::kDegenerate);
  CHECK(result.reason == "output: degenerate output: all zeros (4 elements) where the expected values vary");
  CHECK(result.mismatched_elements == 3);
  // Under torch.allclose's rule the zeros are within 1e-2 everywhere: only this check sees them.
  result = compare(small, f32({0, 0, -0.0f, 0}), {1e-2, 1e-2, true, false});
  CHECK(result.failure == CompareFailure::kDegenerate);
  CHECK(result.mismatched_elements == 0);
  CHECK(compare(small, f32({0, 0, 0, 0}), {1e-2, 1e-2, false, false}).match);

  result = compare(f32({1, 2, 3}), f32({3, 3, 3}));
  CHECK(result.failure == CompareFailure::kDegenerate);
  CHECK(result.reason.find("constant 3 (3 elements)") != std::string::npos);
  CHECK(result.mismatched_elements == 2);  // the value pass still runs for the statistics

  result = compare(f32({1, 2, 3}), f32({NAN, NAN, NAN}));
  CHECK(result.reason.find("all NaN") != std::string::npos);

  // Both constant, a 1-element tensor, and an empty tensor are fine.
  CHECK(compare(f32({7, 7, 7}), f32({7, 7, 7})).match);
  CHECK(compare(f32({0, 0}), f32({0, 0})).match);
  CHECK(compare(f32({NAN, NAN}), f32({NAN, NAN})).match);
  CHECK(compare(f32({5}), f32({5})).match);
  CHECK(compare(f32({}), f32({})).match);
  // Integer outputs too: an all-zero mask for a varying one.
  result = compare(tensor_of<std::int32_t>(DType::kInt32, {3}, {0, 1, 2}),
                   tensor_of<std::int32_t>(DType::kInt32, {3}, {0, 0, 0}));
  CHECK(result.failure == CompareFailure::kDegenerate);
}

TEST_CASE("float16 and bfloat16 bit patterns decode exactly") {
  using cudaagent::bfloat16_to_double;
  using cudaagent::float16_to_double;
  CHECK(float16_to_double(0x3C00) == 1.0);
  CHECK(float16_to_double(0xBC00) == -1.0);
  CHECK(float16_to_double(0x4000) == 2.0);
  CHECK(float16_to_double(0x3555) == 0.333251953125);
  CHECK(float16_to_double(0x7BFF) == 65504.0);
  CHECK(float16_to_double(0x0400) == std::ldexp(1.0, -14));     // smallest normal
  CHECK(float16_to_double(0x0001) == std::ldexp(1.0, -24));     // smallest subnormal
  CHECK(float16_to_double(0x03FF) == std::ldexp(1023.0, -24));  // largest subnormal
  CHECK(float16_to_double(0x8001) == -std::ldexp(1.0, -24));
  CHECK(float16_to_double(0x0000) == 0.0);
  CHECK(std::signbit(float16_to_double(0x8000)));
  CHECK(float16_to_double(0x7C00) == kInf);
  CHECK(float16_to_double(0xFC00) == -kInf);
  CHECK(std::isnan(float16_to_double(0x7E00)));
  CHECK(std::isnan(float16_to_double(0x7C01)));  // signalling-pattern NaN stays NaN, not Inf
  CHECK(std::isnan(float16_to_double(0xFE00)));

  CHECK(bfloat16_to_double(0x3F80) == 1.0);
  CHECK(bfloat16_to_double(0xC000) == -2.0);
  CHECK(bfloat16_to_double(0x4049) == 3.140625);
  CHECK(bfloat16_to_double(0x0080) == std::ldexp(1.0, -126));  // smallest normal
  CHECK(bfloat16_to_double(0x0001) == std::ldexp(1.0, -133));  // smallest subnormal
  CHECK(bfloat16_to_double(0x7F80) == kInf);
  CHECK(bfloat16_to_double(0xFF80) == -kInf);
  CHECK(std::isnan(bfloat16_to_double(0x7FC0)));
  CHECK(std::isnan(bfloat16_to_double(0x7F81)));
  CHECK(std::signbit(bfloat16_to_double(0x8000)));

#if defined(__FLT16_MAX__)
  // Every one of the 65536 half patterns against the compiler's own _Float16.
  int wrong = 0;
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const double ours = float16_to_double(static_cast<std::uint16_t>(bits));
    const double theirs = static_cast<double>(std::bit_cast<_Float16>(static_cast<std::uint16_t>(bits)));
    if (std::isnan(theirs) ? !std::isnan(ours)
                           : std::bit_cast<std::uint64_t>(ours) != std::bit_cast<std::uint64_t>(theirs)) {
      ++wrong;
    }
  }
  CHECK(wrong == 0);
#endif
}

TEST_CASE("half-precision tensors compare by decoded value") {
  // 1.0, 65504, +inf, nan in float16; the candidate is one half-ulp-ish off on the first two.
  const TensorTree expected =
      tensor_of<std::uint16_t>(DType::kFloat16, {4}, {0x3C00, 0x7BFF, 0x7C00, 0x7E00});
  CHECK(compare(expected, tensor_of<std::uint16_t>(DType::kFloat16, {4}, {0x3C01, 0x7BFE, 0x7C00, 0x7FFF}))
            .match);
  CompareResult result =
      compare(expected, tensor_of<std::uint16_t>(DType::kFloat16, {4}, {0x3C00, 0x7BFF, 0x7BFF, 0x7E00}));
  CHECK(result.reason ==
        "output: 1 of 4 elements differ; first at (2): got 65504, expected inf "
        "(NaN and infinities must match exactly)");
  // bf16 {1, 2}: S = 1.5, A = max(0.01, 2 * 2^-7 * 1.5) = 0.0234375, R = 0.01. 1.0 vs 1.0234375
  // (three bf16 steps up) is inside 0.0334375; 1.0 vs 1.0390625 (five) is not.
  const TensorTree one = tensor_of<std::uint16_t>(DType::kBFloat16, {2}, {0x3F80, 0x4000});
  CHECK(compare(one, tensor_of<std::uint16_t>(DType::kBFloat16, {2}, {0x3F83, 0x4000})).match);
  result = compare(one, tensor_of<std::uint16_t>(DType::kBFloat16, {2}, {0x3F85, 0x4000}));
  CHECK(result.reason ==
        "output: 1 of 2 elements differ; first at (0): got 1.0390625, expected 1 "
        "(|diff| 0.0390625 > tolerance 0.0334375)");
}

TEST_CASE("integer and bool tensors compare exactly") {
  const CompareOptions loose{1e9, 1e9, false};
  const auto i32 = [](std::vector<std::int32_t> v) {
    return tensor_of<std::int32_t>(DType::kInt32, {static_cast<std::int64_t>(v.size())}, v);
  };
  CHECK(compare(i32({1, -2, 3}), i32({1, -2, 3}), loose).match);
  CompareResult result = compare(i32({1, -2, 3}), i32({1, -1, 3}), loose);
  CHECK(result.reason == "output: 1 of 3 elements differ; first at (1): got -1, expected -2");
  CHECK(result.worst_path == "output at (1)");
  const std::int64_t big = (std::int64_t{1} << 62) + 1;
  result = compare(tensor_of<std::int64_t>(DType::kInt64, {1}, {big}),
                   tensor_of<std::int64_t>(DType::kInt64, {1}, {big - 1}), loose);
  CHECK(
      result.reason ==
      "output: 1 of 1 elements differ; first at (0): got 4611686018427387904, expected 4611686018427387905");
  CHECK_FALSE(compare(tensor_of<std::int8_t>(DType::kInt8, {1}, {-128}),
                      tensor_of<std::int8_t>(DType::kInt8, {1}, {127}), loose)
                  .match);
  CHECK_FALSE(compare(tensor_of<std::uint8_t>(DType::kUInt8, {1}, {255}),
                      tensor_of<std::uint8_t>(DType::kUInt8, {1}, {254}), loose)
                  .match);
  CHECK_FALSE(compare(tensor_of<std::int16_t>(DType::kInt16, {1}, {-300}),
                      tensor_of<std::int16_t>(DType::kInt16, {1}, {300}), loose)
                  .match);
  // A bool byte of 2 is not True's byte.
  const TensorTree mask = tensor_of<std::uint8_t>(DType::kBool, {2}, {1, 0});
  CHECK(compare(mask, mask).match);
  CHECK_FALSE(compare(mask, tensor_of<std::uint8_t>(DType::kBool, {2}, {2, 0}), loose).match);
  // Scalars.
  CHECK(compare(TensorTree::integer(7), TensorTree::integer(7)).match);
  CHECK(compare(TensorTree::integer(7), TensorTree::integer(8), loose).reason == "output: got 8, expected 7");
  CHECK(compare(TensorTree::boolean(true), TensorTree::boolean(false)).reason ==
        "output: got false, expected true");
  CHECK(compare(TensorTree::none(), TensorTree::none()).match);
}

TEST_CASE("empty tensors match when their shapes do") {
  CHECK(compare(tensor_of<float>(DType::kFloat32, {0, 5}, {}), tensor_of<float>(DType::kFloat32, {0, 5}, {}))
            .match);
  CHECK(compare(tensor_of<float>(DType::kFloat32, {0, 5}, {}), tensor_of<float>(DType::kFloat32, {5, 0}, {}))
            .failure == CompareFailure::kFormat);
}

TEST_CASE("statistics cover every tensor, the reason names the first failure") {
  const TensorTree expected =
      TensorTree::tuple({tensor_of<float>(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}), f32({10, 20}),
                         TensorTree::floating(1.0)});
  const TensorTree actual =
      TensorTree::tuple({tensor_of<float>(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6.5f}), f32({10, 24}),
                         TensorTree::floating(1.0)});
  const CompareResult result = compare(expected, actual);
  CHECK_FALSE(result.match);
  CHECK(result.failure == CompareFailure::kValues);
  CHECK(result.reason ==
        "output[0]: 1 of 6 elements differ; first at (1, 2): got 6.5, expected 6 "
        "(|diff| 0.5 > tolerance 0.06999999999999999)");
  CHECK(result.mismatched_elements == 2);
  CHECK(result.compared_elements == 9);
  CHECK(result.max_abs_error == doctest::Approx(4.0));
  CHECK(result.max_rel_error == doctest::Approx(0.2));
  CHECK(result.worst_path == "output[1] at (1)");
}

TEST_CASE("stop_at_first_mismatch answers the same match, reading only up to the first difference") {
  const TensorTree expected = TensorTree::tuple(
      {f32({1, 2, 3, 4}), tensor_of<std::int32_t>(DType::kInt32, {3}, {1, 2, 3}), f32({5, 6})});
  const TensorTree actual = TensorTree::tuple(
      {f32({1, 2.5f, 3.5f, 4.5f}), tensor_of<std::int32_t>(DType::kInt32, {3}, {0, 0, 0}), f32({7, 8})});
  cudaagent::CompareOptions stop;
  stop.stop_at_first_mismatch = true;
  const CompareResult full = cudaagent::compare_outputs(expected, actual, {});
  const CompareResult early = cudaagent::compare_outputs(expected, actual, stop);
  CHECK_FALSE(full.match);
  CHECK_FALSE(early.match);
  CHECK(early.failure == CompareFailure::kValues);
  CHECK(early.reason ==
        "output[0]: elements differ (compared up to the first); first at (1): got 2.5, expected 2 "
        "(|diff| 0.5 > tolerance 0.03)");
  CHECK(full.mismatched_elements == 8);
  CHECK(early.mismatched_elements == 1);
  CHECK(early.compared_elements == 4);  // the later tensors were never read
  // Integers stop too; a match is still a match, every element read.
  const TensorTree ints = tensor_of<std::int32_t>(DType::kInt32, {3}, {1, 2, 3});
  const CompareResult int_early =
      cudaagent::compare_outputs(ints, tensor_of<std::int32_t>(DType::kInt32, {3}, {1, 0, 0}), stop);
  CHECK(int_early.mismatched_elements == 1);
  const CompareResult same = cudaagent::compare_outputs(expected, expected, stop);
  CHECK(same.match);
  CHECK(same.compared_elements == 9);
}

TEST_CASE("hand-built trees whose bytes disagree with their shape are refused, not read") {
  TensorTree lying = f32({1, 2});
  lying.shape = {1000000};
  CompareResult result = compare(lying, lying);
  CHECK(result.failure == CompareFailure::kFormat);
  CHECK(result.reason == "output: tensor bytes do not match its shape and dtype");
  CHECK_FALSE(cudaagent::tensors_bytes_equal(lying, lying));
}

TEST_CASE("a large tensor is compared in full") {
  const std::size_t n = std::size_t{1} << 22;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 1000) * 0.5f;
  std::vector<float> near = values;
  near[n - 1] += 10.0f;
  const auto size = static_cast<std::int64_t>(n);
  const CompareResult result = compare(tensor_of<float>(DType::kFloat32, {size}, values),
                                       tensor_of<float>(DType::kFloat32, {size}, near));
  CHECK(result.mismatched_elements == 1);
  CHECK(result.compared_elements == n);
  CHECK(result.worst_path == "output at (" + std::to_string(n - 1) + ")");
}

TEST_CASE("tensors_bytes_equal is exact") {
  const TensorTree a = TensorTree::tuple({f32({1, 2}), TensorTree::floating(kNaN), TensorTree::integer(3)});
  TensorTree b = TensorTree::tuple({f32({1, 2}), TensorTree::floating(kNaN), TensorTree::integer(3)});
  CHECK(cudaagent::tensors_bytes_equal(a, b));
  b.items[0] = f32({1, std::nextafter(2.0f, 3.0f)});
  CHECK_FALSE(cudaagent::tensors_bytes_equal(a, b));
  CHECK_FALSE(cudaagent::tensors_bytes_equal(TensorTree::floating(0.0), TensorTree::floating(-0.0)));
  CHECK_FALSE(cudaagent::tensors_bytes_equal(TensorTree::tuple({}), TensorTree::list({})));
  CHECK_FALSE(cudaagent::tensors_bytes_equal(
      TensorTree::dict({{"a", TensorTree::none()}, {"b", TensorTree::none()}}),
      TensorTree::dict({{"b", TensorTree::none()}, {"a", TensorTree::none()}})));
  TensorTree cpu = f32({1, 2});
  cpu.device = Device::kCpu;
  CHECK_FALSE(cudaagent::tensors_bytes_equal(f32({1, 2}), cpu));
}
