// The scaled tolerance (issue 10, class 3): a wrong softmax over thousands of columns fails where
// torch.allclose's rule let 99% of its elements be wrong, while honest float32 reorderings, fused
// against unfused half-precision chains, float64 references computed in float32 and outputs of
// mixed magnitudes pass. Data are drawn from fixed seeds; every "honest" candidate really computes
// the same function another way.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cudaagent/candidate/tensor_compare.h"

using cudaagent::CompareFailure;
using cudaagent::CompareOptions;
using cudaagent::DType;
using cudaagent::TensorTree;

namespace {

template <class T>
TensorTree tensor_of(DType dtype, std::vector<std::int64_t> shape, const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return TensorTree::tensor(dtype, std::move(shape), std::move(bytes), cudaagent::Device::kCuda);
}

TensorTree f32(std::int64_t rows, std::int64_t cols, const std::vector<float>& v) {
  return tensor_of<float>(DType::kFloat32, {rows, cols}, v);
}

// float -> bfloat16 / float16 bits, round to nearest even (finite values only).
std::uint16_t to_bf16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
float from_bf16(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }
float round_bf16(float value) { return from_bf16(to_bf16(value)); }

std::vector<float> normal(std::size_t n, unsigned seed, float scale = 1.0f, float shift = 0.0f) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> distribution(0.0f, 1.0f);
  std::vector<float> out(n);
  for (float& v : out) v = shift + scale * distribution(generator);
  return out;
}

// Row softmax over `cols`, in float, subtracting the row maximum (torch's order), or without it
// and summing in reverse (another honest order).
std::vector<float> softmax(const std::vector<float>& x, std::size_t cols, bool other_order) {
  std::vector<float> out(x.size());
  for (std::size_t r = 0; r < x.size() / cols; ++r) {
    const float* in = &x[r * cols];
    float* row = &out[r * cols];
    const float top = other_order ? 0.0f : *std::max_element(in, in + cols);
    float sum = 0.0f;
    for (std::size_t k = 0; k < cols; ++k) {
      const std::size_t c = other_order ? cols - 1 - k : k;
      row[c] = std::exp(in[c] - top);
      sum += row[c];
    }
    for (std::size_t c = 0; c < cols; ++c) row[c] /= sum;
  }
  return out;
}

// (rows x depth) @ (depth x cols) in float: k in order, or in `blocks` partial sums added after.
std::vector<float> gemm(const std::vector<float>& a, const std::vector<float>& b, std::size_t rows,
                        std::size_t depth, std::size_t cols, std::size_t blocks = 1) {
  std::vector<float> out(rows * cols);
  const std::size_t step = depth / blocks;
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      float total = 0.0f;
      for (std::size_t block = 0; block < blocks; ++block) {
        float partial = 0.0f;
        for (std::size_t k = block * step; k < (block + 1) * step; ++k) partial += a[i * depth + k] * b[k * cols + j];
        total += partial;
      }
      out[i * cols + j] = total;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("issue 10 class 3: a wrong softmax over 8192 columns fails; allclose's rule passed it") {
  const std::size_t rows = 8, cols = 8192;
  const std::vector<float> expected = softmax(normal(rows * cols, 1), cols, false);
  // Another input's softmax: the right scale and distribution, nearly every element wrong.
  const std::vector<float> wrong = softmax(normal(rows * cols, 2), cols, false);
  const auto e = f32(rows, cols, expected);
  const auto a = f32(rows, cols, wrong);
  CompareOptions allclose;
  allclose.scale_atol = false;
  CHECK(cudaagent::compare_outputs(e, a, allclose).match);  // the hole: everything is below 0.01
  const auto result = cudaagent::compare_outputs(e, a);
  CHECK_FALSE(result.match);
  CHECK(result.failure == CompareFailure::kValues);
  CHECK(result.mismatched_elements > rows * cols * 9 / 10);
  // Uniform values with noise: also rejected.
  std::vector<float> uniform(rows * cols, 1.0f / static_cast<float>(cols));
  const std::vector<float> noise = normal(rows * cols, 3, 0.1f);
  for (std::size_t i = 0; i < uniform.size(); ++i) uniform[i] *= 1.0f + noise[i];
  CHECK_FALSE(cudaagent::compare_outputs(e, f32(rows, cols, uniform)).match);
  // The honest one, summed in another order without the max shift: passes.
  CHECK(cudaagent::compare_outputs(e, f32(rows, cols, softmax(normal(rows * cols, 1), cols, true))).match);
}

TEST_CASE("honest float32 reorderings pass: split-K GEMM (TF32 off), elements that cancel to zero") {
  const std::size_t rows = 32, depth = 1024, cols = 48;
  const std::vector<float> a = normal(rows * depth, 4), b = normal(depth * cols, 5, 0.03f);
  const auto expected = f32(rows, cols, gemm(a, b, rows, depth, cols));
  for (std::size_t blocks : {2u, 8u, 64u}) {
    CAPTURE(blocks);
    const auto result = cudaagent::compare_outputs(expected, f32(rows, cols, gemm(a, b, rows, depth, cols, blocks)));
    CHECK(result.match);
  }
  // x - mean(x) per row, x around 5: outputs near the mean cancel towards zero.
  const std::size_t n = 4096;
  const std::vector<float> x = normal(4 * n, 6, 1.0f, 5.0f);
  std::vector<float> centred(x.size()), centred_pairwise(x.size());
  for (std::size_t r = 0; r < 4; ++r) {
    float sum = 0.0f, left = 0.0f, right = 0.0f;
    for (std::size_t c = 0; c < n; ++c) sum += x[r * n + c];
    for (std::size_t c = 0; c < n / 2; ++c) left += x[r * n + c], right += x[r * n + n / 2 + c];
    for (std::size_t c = 0; c < n; ++c) {
      centred[r * n + c] = x[r * n + c] - sum / static_cast<float>(n);
      centred_pairwise[r * n + c] = x[r * n + c] - (left + right) / static_cast<float>(n);
    }
  }
  CHECK(cudaagent::compare_outputs(f32(4, n, centred), f32(4, n, centred_pairwise)).match);
}

TEST_CASE("a bfloat16 reference rounded after every op passes a fused candidate rounded once") {
  const std::size_t rows = 64, depth = 256, cols = 96;
  std::vector<float> a = normal(rows * depth, 7), b = normal(depth * cols, 8, 1.0f / 16.0f);
  const std::vector<float> bias = normal(cols, 9);
  for (float& v : a) v = round_bf16(v);
  for (float& v : b) v = round_bf16(v);
  const std::vector<float> product = gemm(a, b, rows, depth, cols);
  const std::vector<float> product_other = gemm(a, b, rows, depth, cols, 4);
  std::vector<std::uint16_t> unfused(rows * cols), fused(rows * cols);
  for (std::size_t i = 0; i < rows * cols; ++i) {
    // torch: round the GEMM, round after adding the bias, ReLU, round after doubling.
    const float t = round_bf16(round_bf16(product[i]) + round_bf16(bias[i % cols]));
    unfused[i] = to_bf16(std::max(t, 0.0f) * 2.0f);
    // A fused kernel: float throughout, one rounding at the end.
    fused[i] = to_bf16(std::max(product_other[i] + round_bf16(bias[i % cols]), 0.0f) * 2.0f);
  }
  const auto shape = std::vector<std::int64_t>{static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols)};
  const auto expected = tensor_of<std::uint16_t>(DType::kBFloat16, shape, unfused);
  CHECK(cudaagent::compare_outputs(expected, tensor_of<std::uint16_t>(DType::kBFloat16, shape, fused)).match);
  // A bfloat16 output that is wrong by 5% everywhere still fails.
  std::vector<std::uint16_t> off(unfused.size());
  for (std::size_t i = 0; i < off.size(); ++i) off[i] = to_bf16(from_bf16(unfused[i]) * 1.05f + 0.05f);
  CHECK_FALSE(cudaagent::compare_outputs(expected, tensor_of<std::uint16_t>(DType::kBFloat16, shape, off)).match);
}

TEST_CASE("a float64 reference passes a candidate that computed in float32; a float32 output does not") {
  const std::size_t rows = 16, depth = 512, cols = 16;
  const std::vector<float> a = normal(rows * depth, 10), b = normal(depth * cols, 11, 0.05f);
  std::vector<double> exact(rows * cols), via_float(rows * cols);
  const std::vector<float> product = gemm(a, b, rows, depth, cols, 8);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      double total = 0.0;
      for (std::size_t k = 0; k < depth; ++k) {
        total += static_cast<double>(a[i * depth + k]) * static_cast<double>(b[k * cols + j]);
      }
      exact[i * cols + j] = total;
      via_float[i * cols + j] = static_cast<double>(product[i * cols + j]);
    }
  }
  const std::vector<std::int64_t> shape{static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols)};
  const auto expected = tensor_of<double>(DType::kFloat64, shape, exact);
  CHECK(cudaagent::compare_outputs(expected, tensor_of<double>(DType::kFloat64, shape, via_float)).match);
  const auto as_float32 = cudaagent::compare_outputs(expected, tensor_of<float>(DType::kFloat32, shape, product));
  CHECK(as_float32.failure == CompareFailure::kFormat);
  CHECK(as_float32.reason == "output: dtype float32, expected float64");
}

TEST_CASE("mixed magnitudes: honest errors pass, a wrong large or small element fails") {
  // Half the row near 1e3, half near 1e-3, plus exact zeros: S is set by the large ones.
  std::vector<float> expected = normal(1000, 12, 1e3f);
  const std::vector<float> small = normal(500, 13, 1e-3f);
  std::copy(small.begin(), small.end(), expected.begin() + 500);
  expected[999] = 0.0f;
  std::vector<float> honest = expected;
  for (float& v : honest) v *= 1.0f + 3e-7f;  // a few float32 roundings
  honest[999] = 1e-6f;                          // an exact zero that came out as rounding noise
  CHECK(cudaagent::compare_outputs(f32(1, 1000, expected), f32(1, 1000, honest)).match);
  std::vector<float> wrong_large = expected;
  wrong_large[3] *= 1.03f;
  CHECK_FALSE(cudaagent::compare_outputs(f32(1, 1000, expected), f32(1, 1000, wrong_large)).match);
  std::vector<float> wrong_small = expected;
  wrong_small[600] = 0.5f;
  CHECK_FALSE(cudaagent::compare_outputs(f32(1, 1000, expected), f32(1, 1000, wrong_small)).match);
}

TEST_CASE("element_tolerance: A and R per tensor") {
  CompareOptions options;
  // float32 of mean magnitude 1e-4: A = 0.01 * 1e-4.
  auto t = cudaagent::element_tolerance(f32(1, 4, {1e-4f, -1e-4f, 1e-4f, -1e-4f}), options);
  CHECK(t.absolute == doctest::Approx(1e-6));
  CHECK(t.relative == doctest::Approx(0.01));
  // Magnitude above 1: atol as given; non-finite elements do not count towards S.
  t = cudaagent::element_tolerance(f32(1, 3, {10.0f, -30.0f, INFINITY}), options);
  CHECK(t.absolute == doctest::Approx(0.01));
  // bfloat16 at S = 4: A = 2 * 2^-7 * 4 = 0.0625 (two roundings), R = max(0.01, 2^-7).
  t = cudaagent::element_tolerance(tensor_of<std::uint16_t>(DType::kBFloat16, {2}, {0x4080, 0xC080}), options);
  CHECK(t.absolute == doctest::Approx(0.0625));
  CHECK(t.relative == doctest::Approx(0.01));
  options.rtol = 0;
  t = cudaagent::element_tolerance(tensor_of<std::uint16_t>(DType::kBFloat16, {2}, {0x4080, 0xC080}), options);
  CHECK(t.relative == doctest::Approx(0x1p-7));
  // A float scalar is its own scale; all zeros mean exact zeros.
  CHECK(cudaagent::element_tolerance(TensorTree::floating(0.5), {}).absolute == doctest::Approx(0.005));
  CHECK(cudaagent::element_tolerance(f32(1, 2, {0.0f, 0.0f}), {}).absolute == 0.0);
  // scale_atol off: torch.allclose's A = atol, R = rtol.
  options = {};
  options.scale_atol = false;
  t = cudaagent::element_tolerance(f32(1, 1, {1e-4f}), options);
  CHECK(t.absolute == 0.01);
  CHECK(t.relative == 0.01);
}
