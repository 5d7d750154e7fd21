// The catalog's expression language: precedence, Python's floor division and modulo, functions,
// name resolution and the errors a catalog author sees.
#include "cudaagent/synth/expr.h"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace cudaagent::synth;

namespace {

// Names a, b, c at slots 0, 1, 2.
std::optional<int> abc(std::string_view name) {
  if (name == "a") return 0;
  if (name == "b") return 1;
  if (name == "c") return 2;
  return std::nullopt;
}

double eval(const std::string& text, std::vector<double> slots = {7, -3, 0.5}) {
  auto expr = Expr::compile(text, abc);
  REQUIRE_MESSAGE(expr, expr.status().message());
  return expr.value().eval(slots);
}

std::string compile_error(const std::string& text) {
  auto expr = Expr::compile(text, abc);
  REQUIRE_FALSE(expr);
  return expr.status().message();
}

}  // namespace

TEST_CASE("arithmetic follows C precedence with '^' binding tightest, right to left") {
  CHECK(eval("1 + 2 * 3") == 7);
  CHECK(eval("(1 + 2) * 3") == 9);
  CHECK(eval("2 ^ 3 ^ 2") == 512);
  CHECK(eval("-2 ^ 2") == -4);
  CHECK(eval("2 * 3 ^ 2") == 18);
  CHECK(eval("10 - 4 - 3") == 3);
  CHECK(eval("a * b + c") == -20.5);
  CHECK(eval("1.5e3 + .5") == 1500.5);
}

TEST_CASE("'//' and '%' are Python's floor division and modulo, '/' is real division") {
  CHECK(eval("7 // 2") == 3);
  CHECK(eval("-7 // 2") == -4);
  CHECK(eval("-7 % 3") == 2);
  CHECK(eval("7 % -3") == -2);
  CHECK(eval("7 / 2") == 3.5);
  CHECK(eval("a // 2 * 2 + a % 2") == 7);
}

TEST_CASE("comparisons and logic give 1 or 0") {
  CHECK(eval("1 < 2 && 3 >= 3") == 1);
  CHECK(eval("1 > 2 || 2 != 2") == 0);
  CHECK(eval("!(1 == 2)") == 1);
  CHECK(eval("a % 2 == 1") == 1);
  CHECK(eval("b <= -3 && c > 0") == 1);
}

TEST_CASE("functions: min, max of any arity, floor, ceil, abs of one") {
  CHECK(eval("min(3, 1, 2)") == 1);
  CHECK(eval("max(a, b, c, 10)") == 10);
  CHECK(eval("min(a)") == 7);
  CHECK(eval("floor(2.7) + ceil(2.1) + abs(b)") == 8);
  CHECK(eval("max(1, min(a, 4) * 2)") == 8);
}

TEST_CASE("a division by zero is not finite, for callers to reject") {
  CHECK_FALSE(std::isfinite(eval("1 / (a - 7)")));
  CHECK_FALSE(std::isfinite(eval("1 // 0")));
  CHECK(std::isnan(eval("5 % 0")));
}

TEST_CASE("names resolve to slots at compile time") {
  auto expr = Expr::compile("a + c * 2", abc);
  REQUIRE(expr);
  CHECK(expr.value().slots_used() == std::vector<int>{0, 2});
  CHECK(expr.value().eval(std::vector<double>{1, 0, 10}) == 21);
  CHECK(expr.value().text() == "a + c * 2");
}

TEST_CASE("errors say what and where") {
  CHECK(compile_error("a + kernal") == "unknown name 'kernal' at 5 in 'a + kernal'");
  CHECK(compile_error("sqrt(a)").find("unknown function 'sqrt'") != std::string::npos);
  CHECK(compile_error("floor(a, b)").find("wrong number of arguments to floor()") != std::string::npos);
  CHECK(compile_error("min()").find("wrong number of arguments to min()") != std::string::npos);
  CHECK(compile_error("(a + b").find("expected ')'") != std::string::npos);
  CHECK(compile_error("a + b)").find("unexpected ')'") != std::string::npos);
  CHECK(compile_error("a b").find("unexpected 'b'") != std::string::npos);
  CHECK(compile_error("").find("unexpected end") != std::string::npos);
  CHECK(compile_error("a & b").find("unexpected '&'") != std::string::npos);
  CHECK(compile_error("a +").find("unexpected end") != std::string::npos);
  // The evaluator's stack holds 32 values: left-nested sums need two at most, right-nested ones
  // one per level.
  std::string left = "1";
  for (int i = 0; i < 40; ++i) left = "(" + left + " + 1)";
  CHECK(eval(left) == 41);
  std::string right = "1";
  for (int i = 0; i < 20; ++i) right = "1 + (" + right + ")";
  CHECK(eval(right) == 21);
  for (int i = 0; i < 20; ++i) right = "1 + (" + right + ")";
  CHECK(compile_error(right).find("nests too deeply") != std::string::npos);
}

TEST_CASE("shape-rule calls: a name and expression arguments") {
  auto call = compile_call("conv(a, 3, b + 1)", abc);
  REQUIRE(call);
  CHECK(call.value().name == "conv");
  REQUIRE(call.value().args.size() == 3);
  const std::vector<double> slots{7, -3, 0};
  CHECK(call.value().args[0].eval(slots) == 7);
  CHECK(call.value().args[2].eval(slots) == -2);
  CHECK(call.value().args[2].text() == "b + 1");
  auto bare = compile_call("same", abc);
  REQUIRE(bare);
  CHECK(bare.value().args.empty());
  auto empty = compile_call("same()", abc);
  REQUIRE(empty);
  CHECK(empty.value().args.empty());
  CHECK_FALSE(compile_call("conv(a,", abc));
  CHECK_FALSE(compile_call("conv(a) extra", abc));
  CHECK_FALSE(compile_call("conv(zz)", abc));
  CHECK_FALSE(compile_call("(a)", abc));
}
