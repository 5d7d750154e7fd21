// The composer: determinism, the depth mix, shapes that chain, --ops, the time window, the caps,
// fixed chains with overrides, and the shape rules against values torch gives.
#include "cudaagent/synth/compose.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "cudaagent/synth/task.h"

using namespace cudaagent;
using namespace cudaagent::synth;

namespace {

const Catalog& catalog() {
  static const Catalog c = [] {
    auto loaded = load_catalog(std::string(CUDAAGENT_SOURCE_DIR) + "/share/synth/operators.json");
    REQUIRE_MESSAGE(loaded, loaded.status().message());
    return std::move(loaded).value();
  }();
  return c;
}

int index_of(const std::string& name) {
  auto found = catalog().find(name);
  REQUIRE_MESSAGE(found, name);
  return *found;
}

// Every operator's input is the previous output, and each shape is what its rule says.
void check_chain(const Composition& c) {
  REQUIRE_FALSE(c.ops.empty());
  Shape expected{c.batch};
  expected.insert(expected.end(), c.start_dims.begin(), c.start_dims.end());
  for (const PlacedOp& op : c.ops) {
    CHECK(op.in == expected);
    const OpEntry& entry = catalog().ops[static_cast<std::size_t>(op.entry)];
    auto out = apply_shape_rule(entry.shape, op.in, op.slots);
    REQUIRE(out);
    CHECK(out.value() == op.out);
    CHECK(op.out[0] == c.batch);
    for (auto d : op.out) CHECK(d >= 1);
    expected = op.out;
  }
}

}  // namespace

TEST_CASE("the same seed and index give the same task, others give others") {
  const Composer composer(catalog(), ComposeSettings{});
  std::set<std::string> seen;
  for (std::uint64_t index = 0; index < 40; ++index) {
    auto a = composer.compose(7, index);
    auto b = composer.compose(7, index);
    REQUIRE_MESSAGE(a, a.status().message());
    REQUIRE(b);
    const std::string ra = task_record(catalog(), a.value(), {7, index, "random", {}});
    CHECK(ra == task_record(catalog(), b.value(), {7, index, "random", {}}));
    seen.insert(render_model_py(catalog(), a.value()));
  }
  CHECK(seen.size() >= 38);  // distinct tasks, not one task repeated
  auto other = composer.compose(8, 0);
  REQUIRE(other);
  CHECK(render_model_py(catalog(), other.value()) !=
        render_model_py(catalog(), composer.compose(7, 0).value()));
}

TEST_CASE("the depth histogram of 10,000 tasks follows the weights") {
  ComposeSettings settings;
  settings.depth_weights = {0.1, 0.2, 0.3, 0.25, 0.15};
  settings.batch = 2;  // no window: this is about depths, and it keeps the test quick
  settings.max_dim = 16;
  const Composer composer(catalog(), settings);
  std::map<std::size_t, int> counts;
  const int n = 10000;
  for (int i = 0; i < n; ++i) {
    auto c = composer.compose(123, static_cast<std::uint64_t>(i));
    REQUIRE_MESSAGE(c, c.status().message());
    ++counts[c.value().ops.size()];
  }
  for (std::size_t depth = 1; depth <= 5; ++depth) {
    const double share = counts[depth] / static_cast<double>(n);
    CAPTURE(depth);
    CHECK(std::fabs(share - settings.depth_weights[depth - 1]) < 0.02);  // about 4.5 sigma
  }
  // The default mix is CUDA Agent's: 83.77% two operators.
  const Composer defaults(catalog(), ComposeSettings{});
  int two = 0;
  for (int i = 0; i < n; ++i) {
    Rng rng(5, static_cast<std::uint64_t>(i));
    two += defaults.draw_depth(rng) == 2 ? 1 : 0;
  }
  CHECK(std::fabs(two / static_cast<double>(n) - 0.8377) < 0.015);
}

TEST_CASE("shapes chain by construction, at every depth") {
  ComposeSettings settings;
  settings.depth_weights = {0.2, 0.2, 0.2, 0.2, 0.2};
  const Composer composer(catalog(), settings);
  for (std::uint64_t index = 0; index < 300; ++index) {
    auto c = composer.compose(99, index);
    REQUIRE_MESSAGE(c, c.status().message());
    check_chain(c.value());
  }
}

TEST_CASE("the estimate lands in the window and is the sum of the operators' estimates") {
  for (auto [lo, hi] : {std::pair{1.0, 100.0}, std::pair{5.0, 6.0}, std::pair{0.5, 2.0}}) {
    ComposeSettings settings;
    settings.window_lo_ms = lo;
    settings.window_hi_ms = hi;
    const Composer composer(catalog(), settings);
    for (std::uint64_t index = 0; index < 150; ++index) {
      auto c = composer.compose(3, index);
      REQUIRE_MESSAGE(c, c.status().message());
      CAPTURE(lo);
      CHECK(c.value().est_ms >= lo);
      CHECK(c.value().est_ms <= hi);
      double sum = 0, flops = 0, bytes = 0;
      for (const PlacedOp& op : c.value().ops) {
        const OpEntry& e = catalog().ops[static_cast<std::size_t>(op.entry)];
        sum += composer.op_ms(e, op.flops, op.bytes);
        flops += op.flops;
        bytes += op.bytes;
      }
      CHECK(c.value().est_ms == doctest::Approx(sum));
      CHECK(c.value().flops == doctest::Approx(flops));
      CHECK(c.value().bytes == doctest::Approx(bytes));
      CHECK(c.value().memory_bytes <= settings.memory_bytes);
    }
  }
}

TEST_CASE("the output stays within the 4 GiB a verifier reads, even when memory allows more") {
  ComposeSettings settings;
  settings.memory_bytes = 64.0 * (1ull << 30);
  settings.window_lo_ms = 50;
  settings.window_hi_ms = 100;
  const double cap = static_cast<double>(((std::int64_t{4} << 30) - (std::int64_t{1} << 20)) / 4);
  const Composer composer(catalog(), settings, {index_of("relu")});
  for (std::uint64_t index = 0; index < 50; ++index) {
    auto c = composer.compose(1, index);
    if (!c) continue;  // relu alone may not reach 50 ms under the cap: no task, never a big one
    double elements = 1;
    for (auto d : c.value().ops.back().out) elements *= static_cast<double>(d);
    CHECK(elements <= cap);
  }
  // With a fixed batch a large output is an error: 2^21 rows of 512 are 2^30 elements, over the
  // cap but under int32's limit on any one tensor.
  ComposeSettings fixed;
  fixed.batch = std::int64_t{1} << 21;
  fixed.attempts = 1;
  const Composer big(catalog(), fixed, {index_of("relu")});
  int refused = 0;
  for (std::uint64_t index = 0; index < 40; ++index) {
    auto c = big.compose(1, index);
    if (c) {
      double elements = 1;
      for (auto d : c.value().ops.back().out) elements *= static_cast<double>(d);
      CHECK(elements <= cap);
    } else {
      refused += c.status().message().find("output over the 4 GiB") != std::string::npos;
    }
  }
  CHECK(refused > 0);
}

TEST_CASE("the device model: compute-bound, memory-bound and launch-bound operators") {
  ComposeSettings settings;
  settings.device = {50.0, 100.0, 2.0, 10.0};
  const Composer composer(catalog(), settings);
  const OpEntry& linear = catalog().ops[static_cast<std::size_t>(index_of("linear"))];
  const OpEntry& conv = catalog().ops[static_cast<std::size_t>(index_of("conv2d"))];
  const OpEntry& view = catalog().ops[static_cast<std::size_t>(index_of("flatten"))];
  CHECK(composer.op_ms(linear, 50e12, 0) == doctest::Approx(1000.0 + 0.01));
  CHECK(composer.op_ms(conv, 50e12, 0) == doctest::Approx(500.0 + 0.01));
  CHECK(composer.op_ms(linear, 0, 2e12) == doctest::Approx(1000.0 + 0.01));
  CHECK(composer.op_ms(view, 1e15, 1e15) == 0);  // no kernel, no time
}

TEST_CASE("--ops restricts every position") {
  const std::vector<int> allowed{index_of("conv2d"), index_of("relu"), index_of("batch_norm2d"),
                                 index_of("max_pool2d")};
  const Composer composer(catalog(), ComposeSettings{}, allowed);
  for (std::uint64_t index = 0; index < 200; ++index) {
    auto c = composer.compose(1, index);
    REQUIRE_MESSAGE(c, c.status().message());
    for (const PlacedOp& op : c.value().ops) {
      CHECK(std::find(allowed.begin(), allowed.end(), op.entry) != allowed.end());
    }
  }
}

TEST_CASE("an impossible request fails with a reason instead of looping") {
  ComposeSettings settings;
  settings.window_lo_ms = 1000;
  settings.window_hi_ms = 2000;
  settings.memory_bytes = 1 << 20;
  settings.attempts = 20;
  const Composer composer(catalog(), settings, {index_of("relu")});
  auto c = composer.compose(1, 0);
  REQUIRE_FALSE(c);
  CHECK(c.status().message().find("attempts; the last:") != std::string::npos);
}

TEST_CASE("--batch fixes the batch and ignores the window, --max-dim caps drawn sizes") {
  ComposeSettings settings;
  settings.batch = 3;
  settings.max_dim = 16;
  settings.window_lo_ms = 1000;  // unreachable; ignored with a fixed batch
  settings.window_hi_ms = 2000;
  const Composer composer(catalog(), settings);
  for (std::uint64_t index = 0; index < 200; ++index) {
    auto c = composer.compose(4, index);
    REQUIRE_MESSAGE(c, c.status().message());
    CHECK(c.value().batch == 3);
    check_chain(c.value());
    // Start dims are capped unless a multiple forces more (sequence dims are multiples of 64).
    for (auto d : c.value().start_dims) CHECK(d <= 64);
  }
}

TEST_CASE("a fixed chain: built when the shapes fit, a reason when they cannot") {
  const Composer composer(catalog(), ComposeSettings{});
  auto good = composer.compose_chain({{index_of("conv2d"), {}}, {index_of("batch_norm2d"), {}},
                                      {index_of("relu"), {}}},
                                     2, 0);
  REQUIRE_MESSAGE(good, good.status().message());
  check_chain(good.value());
  CHECK(good.value().ops.size() == 3);

  auto bad = composer.compose_chain({{index_of("linear"), {}}, {index_of("conv3d"), {}}}, 2, 0);
  REQUIRE_FALSE(bad);
  CHECK(bad.status().message().find("operator 2 conv3d: needs a tensor of rank 5") != std::string::npos);

  auto terminal = composer.compose_chain({{index_of("argmax"), {}}, {index_of("relu"), {}}}, 2, 0);
  REQUIRE_FALSE(terminal);
  CHECK(terminal.status().message().find("can only be the last operator") != std::string::npos);
}

TEST_CASE("overrides fix parameters, and values a parameter does not allow are refused") {
  const Composer composer(catalog(), ComposeSettings{});
  ParamOverride kernel{"kernel_size", 5, {}, false};
  auto fixed = composer.compose_chain({{index_of("conv2d"), {kernel}}}, 2, 0);
  REQUIRE_MESSAGE(fixed, fixed.status().message());
  const OpEntry& conv = catalog().ops[static_cast<std::size_t>(index_of("conv2d"))];
  CHECK(fixed.value().ops[0].slots[static_cast<std::size_t>(*conv.slot_of("kernel_size"))] == 5);

  ParamOverride four{"kernel_size", 4, {}, false};
  auto refused = composer.compose_chain({{index_of("conv2d"), {four}}}, 2, 0);
  REQUIRE_FALSE(refused);
  CHECK(refused.status().message() ==
        "operator 1 conv2d: parameter 'kernel_size' cannot be 4.000000 (not one of its choices)");

  ParamOverride derived{"in_channels", 3, {}, false};
  auto not_free = composer.compose_chain({{index_of("conv2d"), {derived}}}, 2, 0);
  REQUIRE_FALSE(not_free);
  CHECK(not_free.status().message().find("is derived, not chosen") != std::string::npos);

  ParamOverride unknown{"kernel", 3, {}, false};
  auto missing = composer.compose_chain({{index_of("conv2d"), {unknown}}}, 2, 0);
  REQUIRE_FALSE(missing);
  CHECK(missing.status().message().find("has no parameter 'kernel'") != std::string::npos);

  ParamOverride slope{"negative_slope", 0.2, {}, false};
  auto leaky = composer.compose_chain({{index_of("leaky_relu"), {slope}}}, 2, 0);
  REQUIRE(leaky);
  ParamOverride too_steep{"negative_slope", 0.9, {}, false};
  CHECK_FALSE(composer.compose_chain({{index_of("leaky_relu"), {too_steep}}}, 2, 0));
}

TEST_CASE("shape rules agree with torch's arithmetic") {
  auto rule = [](const std::string& text) {
    auto call = compile_call(text, [](std::string_view) { return std::nullopt; });
    REQUIRE_MESSAGE(call, call.status().message());
    ShapeRule r;
    const std::map<std::string, ShapeRuleKind> kinds = {
        {"conv", ShapeRuleKind::kConv}, {"conv_transpose", ShapeRuleKind::kConvTranspose},
        {"pool", ShapeRuleKind::kPool}, {"reduce", ShapeRuleKind::kReduce},
        {"flatten", ShapeRuleKind::kFlatten}, {"transpose", ShapeRuleKind::kTranspose},
        {"pixel_shuffle", ShapeRuleKind::kPixelShuffle}, {"set", ShapeRuleKind::kSet},
        {"shape", ShapeRuleKind::kShape}};
    r.kind = kinds.at(call.value().name);
    r.args = std::move(call.value().args);
    return r;
  };
  const std::vector<double> none;
  auto apply = [&](const std::string& text, const Shape& in) {
    auto out = apply_shape_rule(rule(text), in, none);
    REQUIRE_MESSAGE(out, out.status().message());
    return out.value();
  };
  // Values printed by torch 1.13 for the same arguments.
  CHECK(apply("conv(16, 3, 2, 1, 1)", {2, 3, 32, 31}) == Shape{2, 16, 16, 16});
  CHECK(apply("conv(8, 5, 1, 0, 2)", {1, 4, 20}) == Shape{1, 8, 12});
  CHECK(apply("conv_transpose(4, 3, 2, 1, 1, 1)", {1, 8, 16, 16}) == Shape{1, 4, 32, 32});
  CHECK(apply("pool(2, 2, 0, 1, 0)", {1, 3, 5}) == Shape{1, 3, 2});
  CHECK(apply("pool(2, 2, 0, 1, 1)", {1, 3, 5}) == Shape{1, 3, 3});
  CHECK(apply("pool(1, 2, 0, 1, 1)", {1, 3, 4}) == Shape{1, 3, 2});  // torch drops the last window
  CHECK(apply("pool(3, 2, 1, 1, 1)", {1, 3, 6}) == Shape{1, 3, 4});
  CHECK(apply("reduce(-1, 0)", {2, 3, 4}) == Shape{2, 3});
  CHECK(apply("reduce(1, 1)", {2, 3, 4}) == Shape{2, 1, 4});
  CHECK(apply("flatten(1)", {2, 3, 4, 5}) == Shape{2, 60});
  CHECK(apply("transpose(1, 2)", {2, 3, 4}) == Shape{2, 4, 3});
  CHECK(apply("pixel_shuffle(2)", {1, 8, 3, 5}) == Shape{1, 2, 6, 10});
  CHECK(apply("set(-1, 7)", {2, 3, 4}) == Shape{2, 3, 7});
  // Rules that cannot apply say so; the batch is never touched.
  CHECK_FALSE(apply_shape_rule(rule("conv(4, 7, 1, 0, 1)"), {1, 3, 5, 5}, none));
  CHECK_FALSE(apply_shape_rule(rule("reduce(0, 0)"), {2, 3}, none));
  CHECK_FALSE(apply_shape_rule(rule("reduce(-2, 0)"), {2, 3}, none));
  CHECK_FALSE(apply_shape_rule(rule("pixel_shuffle(2)"), {1, 6, 3, 3}, none));
  CHECK_FALSE(apply_shape_rule(rule("shape(5, 3)"), {2, 3}, none));
  CHECK_FALSE(apply_shape_rule(rule("set(1, 0)"), {2, 3}, none));
}

TEST_CASE("the random stream: bounds and a log-uniform spread") {
  Rng rng(1, 2);
  int low_half = 0;
  for (int i = 0; i < 20000; ++i) {
    const auto u = rng.uniform_int(-3, 3);
    CHECK(u >= -3);
    CHECK(u <= 3);
    const auto v = rng.log_uniform_int(1, 1024);
    CHECK(v >= 1);
    CHECK(v <= 1024);
    low_half += v < 32 ? 1 : 0;  // log-uniform: about half below sqrt(1024)
    const double r = rng.uniform();
    CHECK(r >= 0);
    CHECK(r < 1);
  }
  CHECK(std::abs(low_half - 10000) < 400);
  CHECK(Rng(1, 2).next() == Rng(1, 2).next());
  CHECK(Rng(1, 2).next() != Rng(1, 3).next());
  CHECK(Rng(1, 2).next() != Rng(2, 2).next());
}
