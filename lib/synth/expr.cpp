// The catalog's expression language: a recursive-descent parser that emits a postfix program, and
// a stack machine that runs it. Programs are tiny (tens of ops), so the stack is a fixed array.
#include "cudaagent/synth/expr.h"

#include <array>
#include <charconv>
#include <cmath>

namespace cudaagent::synth {

class ExprParser {
 public:
  ExprParser(std::string_view text, const NameResolver& resolve) : text_(text), resolve_(resolve) {}

  Status parse_expression(Expr& out) {
    code_ = &out.code_;
    if (auto status = parse_or(); !status) return status;
    skip_space();
    if (pos_ != text_.size()) return error("unexpected '" + std::string(text_.substr(pos_, 1)) + "'");
    return check_depth(out);
  }

  Status parse_call(ExprCall& out) {
    skip_space();
    std::string_view name = identifier();
    if (name.empty()) return error("expected a rule name");
    out.name = std::string(name);
    skip_space();
    if (pos_ == text_.size()) return Status::ok();
    if (!accept("(")) return error("expected '(' after '" + out.name + "'");
    skip_space();
    if (accept(")")) return finish_call();
    for (;;) {
      Expr arg;
      code_ = &arg.code_;
      const std::size_t start = pos_;
      if (auto status = parse_or(); !status) return status;
      arg.text_ = std::string(trim(text_.substr(start, pos_ - start)));
      if (auto status = check_depth(arg); !status) return status;
      out.args.push_back(std::move(arg));
      skip_space();
      if (accept(")")) return finish_call();
      if (!accept(",")) return error("expected ',' or ')'");
    }
  }

 private:
  using Kind = Expr::Op::Kind;

  Status finish_call() {
    skip_space();
    if (pos_ != text_.size()) return error("unexpected text after ')'");
    return Status::ok();
  }

  static std::string_view trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  }

  // The evaluator's stack is fixed; reject programs that would overflow it.
  Status check_depth(const Expr& expr) {
    int depth = 0, deepest = 0;
    for (const auto& op : expr.code_) {
      switch (op.kind) {
        case Kind::kConst: case Kind::kSlot: ++depth; break;
        case Kind::kNeg: case Kind::kNot: case Kind::kFloor: case Kind::kCeil: case Kind::kAbs: break;
        case Kind::kMin: case Kind::kMax: depth -= op.arg - 1; break;
        default: --depth; break;
      }
      deepest = std::max(deepest, depth);
    }
    if (deepest > 32) return error("expression nests too deeply");
    return Status::ok();
  }

  Status error(const std::string& what) const {
    return Status::error(what + " at " + std::to_string(pos_ + 1) + " in '" + std::string(text_) + "'");
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool accept(std::string_view token) {
    skip_space();
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  std::string_view identifier() {
    const std::size_t start = pos_;
    auto is_start = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    auto is_part = [&](char c) { return is_start(c) || (c >= '0' && c <= '9'); };
    if (pos_ < text_.size() && is_start(text_[pos_])) {
      while (pos_ < text_.size() && is_part(text_[pos_])) ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }
  void emit(Kind kind, int arg = 0, double value = 0) { code_->push_back({kind, arg, value}); }

  Status parse_or() {
    if (auto s = parse_and(); !s) return s;
    while (accept("||")) {
      if (auto s = parse_and(); !s) return s;
      emit(Kind::kOr);
    }
    return Status::ok();
  }
  Status parse_and() {
    if (auto s = parse_cmp(); !s) return s;
    while (accept("&&")) {
      if (auto s = parse_cmp(); !s) return s;
      emit(Kind::kAnd);
    }
    return Status::ok();
  }
  Status parse_cmp() {
    if (auto s = parse_sum(); !s) return s;
    static constexpr std::array<std::pair<std::string_view, Kind>, 6> kOps{{
        {"==", Kind::kEq}, {"!=", Kind::kNe}, {"<=", Kind::kLe},
        {">=", Kind::kGe}, {"<", Kind::kLt}, {">", Kind::kGt}}};
    for (const auto& [token, kind] : kOps) {
      if (accept(token)) {
        if (auto s = parse_sum(); !s) return s;
        emit(kind);
        return Status::ok();
      }
    }
    return Status::ok();
  }
  Status parse_sum() {
    if (auto s = parse_product(); !s) return s;
    for (;;) {
      Kind kind;
      if (accept("+")) kind = Kind::kAdd;
      else if (accept("-")) kind = Kind::kSub;
      else return Status::ok();
      if (auto s = parse_product(); !s) return s;
      emit(kind);
    }
  }
  Status parse_product() {
    if (auto s = parse_unary(); !s) return s;
    for (;;) {
      Kind kind;
      if (accept("//")) kind = Kind::kFloorDiv;
      else if (accept("*")) kind = Kind::kMul;
      else if (accept("/")) kind = Kind::kDiv;
      else if (accept("%")) kind = Kind::kMod;
      else return Status::ok();
      if (auto s = parse_unary(); !s) return s;
      emit(kind);
    }
  }
  Status parse_unary() {
    if (accept("-")) {
      if (auto s = parse_unary(); !s) return s;
      emit(Kind::kNeg);
      return Status::ok();
    }
    skip_space();
    if (text_.substr(pos_, 2) != "!=" && accept("!")) {
      if (auto s = parse_unary(); !s) return s;
      emit(Kind::kNot);
      return Status::ok();
    }
    if (auto s = parse_atom(); !s) return s;
    if (accept("^")) {
      if (auto s = parse_unary(); !s) return s;
      emit(Kind::kPow);
    }
    return Status::ok();
  }
  Status parse_atom() {
    skip_space();
    if (pos_ == text_.size()) return error("unexpected end");
    const char c = text_[pos_];
    if ((c >= '0' && c <= '9') || c == '.') {
      double value = 0;
      const char* begin = text_.data() + pos_;
      const auto [end, ec] = std::from_chars(begin, text_.data() + text_.size(), value);
      if (ec != std::errc()) return error("bad number");
      pos_ += static_cast<std::size_t>(end - begin);
      emit(Kind::kConst, 0, value);
      return Status::ok();
    }
    if (accept("(")) {
      if (auto s = parse_or(); !s) return s;
      if (!accept(")")) return error("expected ')'");
      return Status::ok();
    }
    const std::size_t start = pos_;
    std::string_view name = identifier();
    if (name.empty()) return error("unexpected '" + std::string(1, c) + "'");
    if (accept("(")) return parse_function(name, start);
    auto slot = resolve_(name);
    if (!slot) {
      pos_ = start;
      return error("unknown name '" + std::string(name) + "'");
    }
    emit(Kind::kSlot, *slot);
    return Status::ok();
  }
  Status parse_function(std::string_view name, std::size_t start) {
    int count = 0;
    if (!accept(")")) {
      for (;;) {
        if (auto s = parse_or(); !s) return s;
        ++count;
        if (accept(")")) break;
        if (!accept(",")) return error("expected ',' or ')'");
      }
    }
    struct Function { std::string_view name; Kind kind; bool variadic; };
    static constexpr std::array<Function, 5> kFunctions{{{"min", Kind::kMin, true},
                                                         {"max", Kind::kMax, true},
                                                         {"floor", Kind::kFloor, false},
                                                         {"ceil", Kind::kCeil, false},
                                                         {"abs", Kind::kAbs, false}}};
    for (const auto& function : kFunctions) {
      if (function.name != name) continue;
      if (function.variadic ? count < 1 : count != 1) {
        pos_ = start;
        return error("wrong number of arguments to " + std::string(name) + "()");
      }
      emit(function.kind, count);
      return Status::ok();
    }
    pos_ = start;
    return error("unknown function '" + std::string(name) + "'");
  }

  std::string_view text_;
  const NameResolver& resolve_;
  std::size_t pos_ = 0;
  std::vector<Expr::Op>* code_ = nullptr;
};

Result<Expr> Expr::compile(std::string_view text, const NameResolver& resolve) {
  Expr expr;
  expr.text_ = std::string(text);
  ExprParser parser(text, resolve);
  if (auto status = parser.parse_expression(expr); !status) return status;
  return expr;
}

Expr Expr::constant(double value) {
  Expr expr;
  expr.code_.push_back({Op::Kind::kConst, 0, value});
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  expr.text_.assign(buffer, ec == std::errc() ? end : buffer);
  return expr;
}

std::vector<int> Expr::slots_used() const {
  std::vector<int> out;
  for (const auto& op : code_) {
    if (op.kind == Op::Kind::kSlot) out.push_back(op.arg);
  }
  return out;
}

double Expr::eval(std::span<const double> slots) const {
  std::array<double, 40> stack;
  std::size_t top = 0;  // number of values on the stack
  for (const auto& op : code_) {
    using K = Op::Kind;
    switch (op.kind) {
      case K::kConst: stack[top++] = op.value; continue;
      case K::kSlot: stack[top++] = slots[static_cast<std::size_t>(op.arg)]; continue;
      case K::kNeg: stack[top - 1] = -stack[top - 1]; continue;
      case K::kNot: stack[top - 1] = stack[top - 1] == 0 ? 1 : 0; continue;
      case K::kFloor: stack[top - 1] = std::floor(stack[top - 1]); continue;
      case K::kCeil: stack[top - 1] = std::ceil(stack[top - 1]); continue;
      case K::kAbs: stack[top - 1] = std::fabs(stack[top - 1]); continue;
      case K::kMin: case K::kMax: {
        const std::size_t n = static_cast<std::size_t>(op.arg);
        double best = stack[top - n];
        for (std::size_t i = top - n + 1; i < top; ++i) {
          best = op.kind == K::kMin ? std::min(best, stack[i]) : std::max(best, stack[i]);
        }
        top -= n;
        stack[top++] = best;
        continue;
      }
      default: break;
    }
    const double b = stack[--top];
    double& a = stack[top - 1];
    switch (op.kind) {
      case K::kAdd: a = a + b; break;
      case K::kSub: a = a - b; break;
      case K::kMul: a = a * b; break;
      case K::kDiv: a = a / b; break;
      case K::kFloorDiv: a = std::floor(a / b); break;
      case K::kMod: a = b == 0 ? std::nan("") : a - b * std::floor(a / b); break;
      case K::kPow: a = std::pow(a, b); break;
      case K::kEq: a = a == b ? 1 : 0; break;
      case K::kNe: a = a != b ? 1 : 0; break;
      case K::kLt: a = a < b ? 1 : 0; break;
      case K::kLe: a = a <= b ? 1 : 0; break;
      case K::kGt: a = a > b ? 1 : 0; break;
      case K::kGe: a = a >= b ? 1 : 0; break;
      case K::kAnd: a = (a != 0 && b != 0) ? 1 : 0; break;
      case K::kOr: a = (a != 0 || b != 0) ? 1 : 0; break;
      default: break;
    }
  }
  return top == 1 ? stack[0] : std::nan("");
}

Result<ExprCall> compile_call(std::string_view text, const NameResolver& resolve) {
  ExprCall call;
  ExprParser parser(text, resolve);
  if (auto status = parser.parse_call(call); !status) return status;
  return call;
}

}  // namespace cudaagent::synth
