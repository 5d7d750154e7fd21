// The small arithmetic language of the operator catalog (share/synth/operators.json): parameter
// derivations, requirements, shape-rule arguments and the cost model are written in it. Names are
// resolved to slots when the catalog is loaded, so a misspelt name is a load error, and evaluation
// is a loop over a postfix program with no allocation.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cudaagent/base/status.h"

namespace cudaagent::synth {

// Maps a name to its slot, or nullopt when the name is unknown at that point of the catalog entry.
using NameResolver = std::function<std::optional<int>(std::string_view name)>;

// A compiled expression. Grammar (C precedence; '^' is power and binds tightest, right to left):
//   or := and ('||' and)*      and := cmp ('&&' cmp)*      cmp := sum (('=='|'!='|'<'|'<='|'>'|'>=') sum)?
//   sum := product (('+'|'-') product)*      product := unary (('*'|'/'|'//'|'%') unary)*
//   unary := ('-'|'!') unary | power      power := atom ('^' unary)?
//   atom := number | name | function '(' or (',' or)* ')' | '(' or ')'
// Functions: min, max (any number of arguments), floor, ceil, abs (one). '/' is real division,
// '//' floor division, '%' the remainder of floor division (Python's). Comparisons and logic give
// 1 or 0. Values are doubles; a division by zero gives a non-finite result, which callers reject.
class Expr {
 public:
  Expr() = default;
  // Compiles `text`; the error says what is wrong and where ("unknown name 'kernal' at 7").
  static Result<Expr> compile(std::string_view text, const NameResolver& resolve);
  // A constant expression.
  static Expr constant(double value);

  // Evaluates with the slot values (slots the expression names must be in range). Thread-safe.
  double eval(std::span<const double> slots) const;
  const std::string& text() const { return text_; }
  bool empty() const { return code_.empty(); }
  // The slots the expression reads, for dependency checks.
  std::vector<int> slots_used() const;

 private:
  friend class ExprParser;
  struct Op {
    enum class Kind : std::uint8_t {
      kConst, kSlot, kNeg, kNot, kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow,
      kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr, kMin, kMax, kFloor, kCeil, kAbs,
    };
    Kind kind;
    int arg = 0;        // slot index, or argument count for min/max
    double value = 0;   // kConst
  };
  std::vector<Op> code_;
  std::string text_;
};

// "name(arg, arg, ...)" or a bare "name": how shape rules are written. Arguments are expressions.
struct ExprCall {
  std::string name;
  std::vector<Expr> args;
};
Result<ExprCall> compile_call(std::string_view text, const NameResolver& resolve);

}  // namespace cudaagent::synth
