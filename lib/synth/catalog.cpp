// Loading the operator catalog. Every field is checked here, once, so the composer can trust the
// entries: expressions are compiled against the entry's scope in the order values become known
// (dims, then parameters one by one, then requirements and shapes, then costs), templates may only
// name what exists, and unknown keys are errors so a misspelt field is never silently ignored.
#include "cudaagent/synth/catalog.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "cudaagent/base/files.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/records/record.h"

namespace cudaagent::synth {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

constexpr std::string_view kFormat = "cudaagent-synth-catalog/1";
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 31;

// Names the generated Python uses itself; a parameter (which may become an init argument of Model)
// may not take them. Names of the fixed slots are taken in every scope anyway.
const std::set<std::string_view> kPythonNames = {
    "x", "self", "torch", "nn", "F", "math", "super", "y1", "y2", "y3", "True", "False", "None",
    "def", "class", "return", "import", "lambda", "for", "if", "else", "and", "or", "not", "is",
    "in", "with", "while", "pass", "del", "global", "from", "as", "try", "except", "raise"};

bool is_identifier(std::string_view name) {
  if (name.empty() || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z'))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

Status fail(const std::string& where, const std::string& what) {
  return Status::error(where + ": " + what);
}

// A JSON integer (or a double with an integral value) in [lo, hi].
bool read_int(element value, std::int64_t& out, std::int64_t lo, std::int64_t hi) {
  double number = 0;
  std::int64_t integer = 0;
  if (!value.get(integer)) {
    out = integer;
  } else if (!value.get(number) && std::floor(number) == number && std::fabs(number) < 9e15) {
    out = static_cast<std::int64_t>(number);
  } else {
    return false;
  }
  return out >= lo && out <= hi;
}

bool read_number(element value, double& out) {
  std::int64_t integer = 0;
  std::uint64_t unsigned_integer = 0;
  if (!value.get(out)) return true;
  if (!value.get(integer)) {
    out = static_cast<double>(integer);
    return true;
  }
  if (!value.get(unsigned_integer)) {
    out = static_cast<double>(unsigned_integer);
    return true;
  }
  return false;
}

// Checks that every key of `obj` is one of `allowed`.
Status check_keys(object obj, std::initializer_list<std::string_view> allowed, const std::string& where) {
  for (auto [key, value] : obj) {
    (void)value;
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return fail(where, "unknown field '" + std::string(key) + "'");
    }
  }
  return Status::ok();
}

// Parses one parameter (or start-shape dimension) specification.
Status parse_spec(element value, ParamSpec& spec, const NameResolver& resolve, bool dims_only,
                  const std::string& where) {
  using Kind = ParamSpec::Kind;
  std::string_view text;
  double number = 0;
  if (!value.get(text)) {
    spec.kind = Kind::kDerived;
    auto expr = Expr::compile(text, resolve);
    if (!expr) return fail(where, expr.status().message());
    spec.derived = std::move(expr).value();
    return Status::ok();
  }
  if (value.type() != element_type::ARRAY && value.type() != element_type::OBJECT &&
      read_number(value, number)) {
    spec.kind = Kind::kDerived;
    spec.derived = Expr::constant(number);
    return Status::ok();
  }
  array list;
  if (!value.get(list)) {  // [lo, hi] or [lo, hi, multiple]
    spec.kind = Kind::kSize;
    std::vector<std::int64_t> numbers;
    for (element item : list) {
      std::int64_t n = 0;
      if (!read_int(item, n, 1, kMaxDimension)) {
        return fail(where, "a size range takes positive integers: [lo, hi] or [lo, hi, multiple]");
      }
      numbers.push_back(n);
    }
    if (numbers.size() < 2 || numbers.size() > 3) {
      return fail(where, "a size range takes [lo, hi] or [lo, hi, multiple]");
    }
    spec.lo = numbers[0];
    spec.hi = numbers[1];
    spec.multiple = numbers.size() == 3 ? numbers[2] : 1;
    if (spec.lo > spec.hi) return fail(where, "size range has lo > hi");
    if (spec.hi / spec.multiple * spec.multiple < spec.lo) {
      return fail(where, "size range holds no multiple of " + std::to_string(spec.multiple));
    }
    return Status::ok();
  }
  object obj;
  if (value.get(obj) || obj.size() != 1) {
    return fail(where, "expected an expression, a number, [lo, hi] or an object with one of "
                       "range, choice, text, bool, float");
  }
  auto [key, body] = *obj.begin();
  if (dims_only && key != "range" && key != "choice") {
    return fail(where, "a start-shape dimension cannot be '" + std::string(key) + "'");
  }
  if (key == "range" || key == "float") {
    array pair;
    double a = 0, b = 0;
    if (body.get(pair) || pair.size() != 2 || !read_number(pair.at(0).value_unsafe(), a) ||
        !read_number(pair.at(1).value_unsafe(), b) || a > b) {
      return fail(where, std::string(key) + " takes [lo, hi] with lo <= hi");
    }
    if (key == "range") {
      spec.kind = Kind::kRange;
      if (std::floor(a) != a || std::floor(b) != b) return fail(where, "range takes integers");
      spec.lo = static_cast<std::int64_t>(a);
      spec.hi = static_cast<std::int64_t>(b);
    } else {
      spec.kind = Kind::kFloat;
      spec.real_lo = a;
      spec.real_hi = b;
    }
    return Status::ok();
  }
  if (key == "choice" || key == "text") {
    array items;
    if (body.get(items) || items.size() == 0) return fail(where, std::string(key) + " takes a non-empty list");
    spec.kind = key == "choice" ? Kind::kChoice : Kind::kText;
    for (element item : items) {
      double n = 0;
      std::string_view s;
      if (spec.kind == Kind::kChoice) {
        if (!read_number(item, n)) return fail(where, "choice takes numbers (use text for strings)");
        spec.choices.push_back(n);
      } else {
        if (item.get(s) || s.empty()) return fail(where, "text takes non-empty strings");
        spec.texts.emplace_back(s);
      }
    }
    return Status::ok();
  }
  if (key == "bool") {
    double p = 0;
    if (!read_number(body, p) || p < 0 || p > 1) return fail(where, "bool takes a probability in [0, 1]");
    spec.kind = Kind::kBool;
    spec.real_lo = p;
    return Status::ok();
  }
  return fail(where, "unknown parameter kind '" + std::string(key) + "'");
}

struct RuleShape {
  std::string_view name;
  ShapeRuleKind kind;
  int min_args, max_args;  // max -1: any
};
constexpr RuleShape kRules[] = {
    {"same", ShapeRuleKind::kSame, 0, 0},
    {"set", ShapeRuleKind::kSet, 2, 2},
    {"conv", ShapeRuleKind::kConv, 5, 5},
    {"conv_transpose", ShapeRuleKind::kConvTranspose, 6, 6},
    {"pool", ShapeRuleKind::kPool, 5, 5},
    {"adaptive", ShapeRuleKind::kAdaptive, 1, 1},
    {"reduce", ShapeRuleKind::kReduce, 2, 2},
    {"flatten", ShapeRuleKind::kFlatten, 1, 1},
    {"transpose", ShapeRuleKind::kTranspose, 2, 2},
    {"upsample", ShapeRuleKind::kUpsample, 1, 1},
    {"pixel_shuffle", ShapeRuleKind::kPixelShuffle, 1, 1},
    {"pixel_unshuffle", ShapeRuleKind::kPixelUnshuffle, 1, 1},
    {"shape", ShapeRuleKind::kShape, 1, -1},
};

// Placeholders of a template: "{name}". "{{" and "}}" are literal braces.
Result<std::vector<std::string>> template_names(std::string_view text) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{') {
      if (i + 1 < text.size() && text[i + 1] == '{') {
        ++i;
        continue;
      }
      const std::size_t close = text.find('}', i);
      if (close == std::string_view::npos) return Status::error("unclosed '{'");
      names.emplace_back(text.substr(i + 1, close - i - 1));
      i = close;
    } else if (text[i] == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        ++i;
        continue;
      }
      return Status::error("unmatched '}' (write '}}' for a brace)");
    }
  }
  return names;
}

class EntryParser {
 public:
  EntryParser(const Catalog& catalog, OpEntry& entry, std::string file, std::size_t index)
      : catalog_(catalog), entry_(entry), file_(std::move(file)),
        where_(file_ + ": operator " + std::to_string(index)) {}

  Status parse(object obj) {
    if (auto s = check_keys(obj, {"name", "family", "doc", "input", "start", "params", "requires",
                                  "shape", "extra_inputs", "init", "forward", "helpers", "cost",
                                  "min_torch", "standalone", "terminal", "weight"},
                            where_);
        !s) {
      return s;
    }
    if (auto s = parse_header(obj); !s) return s;
    if (auto s = parse_input(obj); !s) return s;
    if (auto s = parse_params(obj); !s) return s;
    if (auto s = parse_rules(obj); !s) return s;
    if (auto s = parse_cost(obj); !s) return s;
    return parse_templates(obj);
  }

 private:
  // Resolves names defined so far; `costs` adds out, outrank and in1..inN.
  NameResolver resolver(bool costs) {
    return [this, costs](std::string_view name) -> std::optional<int> {
      auto slot = entry_.slot_of(name);
      if (!slot || *slot >= visible_) return std::nullopt;
      if (!costs && (*slot == kSlotOut || *slot == kSlotOutRank ||
                     (*slot >= kFirstSlotInN && *slot < kFirstSlotDim))) {
        return std::nullopt;
      }
      if (*slot >= kFirstSlotInN && *slot < kFirstSlotDim &&
          *slot - kFirstSlotInN >= static_cast<int>(entry_.extra_inputs.size())) {
        return std::nullopt;
      }
      return slot;
    };
  }

  Status add_slot(const std::string& name, const std::string& what) {
    if (!is_identifier(name)) return fail(where_, what + " '" + name + "' is not an identifier");
    if (what == "parameter" && kPythonNames.count(name) != 0) {
      return fail(where_, what + " '" + name + "' is a name the generated Python uses");
    }
    if (entry_.slot_of(name)) return fail(where_, what + " '" + name + "' is defined twice");
    entry_.slot_names.push_back(name);
    entry_.slot_count = static_cast<int>(entry_.slot_names.size());
    return Status::ok();
  }

  Status parse_header(object obj) {
    std::string_view name, family, doc, min_torch;
    if (obj["name"].get(name) || !is_identifier(name) ||
        std::any_of(name.begin(), name.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
      return fail(where_, "'name' must be a lower-case identifier");
    }
    entry_.name = std::string(name);
    where_ = file_ + ": operator '" + entry_.name + "'";
    if (obj["family"].get(family) || family.empty()) return fail(where_, "'family' must be a non-empty string");
    if (obj["doc"].get(doc) || doc.empty()) return fail(where_, "'doc' must be a non-empty string");
    entry_.family = std::string(family);
    entry_.doc = std::string(doc);
    if (auto v = obj["min_torch"]; v.error() != simdjson::NO_SUCH_FIELD) {
      if (v.get(min_torch) || min_torch.empty() || !std::isdigit(static_cast<unsigned char>(min_torch[0]))) {
        return fail(where_, "'min_torch' must be a version such as \"2.0\"");
      }
      entry_.min_torch = std::string(min_torch);
    }
    for (auto [key, target] : {std::pair<std::string_view, bool*>{"standalone", &entry_.standalone},
                               {"terminal", &entry_.terminal}}) {
      if (auto v = obj[key]; v.error() != simdjson::NO_SUCH_FIELD && v.get(*target)) {
        return fail(where_, "'" + std::string(key) + "' must be true or false");
      }
    }
    if (auto v = obj["weight"]; v.error() != simdjson::NO_SUCH_FIELD) {
      if (!read_number(v.value_unsafe(), entry_.weight) || !(entry_.weight > 0) || entry_.weight > 1e6) {
        return fail(where_, "'weight' must be a positive number");
      }
    }
    // The fixed slots come first in every scope.
    entry_.slot_names = {"esize", "rank", "in", "batch", "last", "out", "outrank",
                         "in1", "in2", "in3", "d1", "d2", "d3", "d4", "d5"};
    entry_.slot_count = static_cast<int>(entry_.slot_names.size());
    return Status::ok();
  }

  Status parse_input(object obj) {
    object input;
    if (obj["input"].get(input)) return fail(where_, "'input' must be an object");
    const std::string where = where_ + ": input";
    if (auto s = check_keys(input, {"rank", "min_rank", "names"}, where); !s) return s;
    std::int64_t n = 0;
    const bool has_rank = input["rank"].error() != simdjson::NO_SUCH_FIELD;
    const bool has_min = input["min_rank"].error() != simdjson::NO_SUCH_FIELD;
    if (has_rank == has_min) return fail(where, "give exactly one of 'rank' and 'min_rank'");
    if (!read_int(input[has_rank ? "rank" : "min_rank"].value_unsafe(), n, 1, 6)) {
      return fail(where, "rank must be an integer from 1 to 6");
    }
    (has_rank ? entry_.rank : entry_.min_rank) = static_cast<int>(n);
    if (has_rank) entry_.min_rank = static_cast<int>(n);
    if (auto v = input["names"]; v.error() != simdjson::NO_SUCH_FIELD) {
      array names;
      if (v.get(names)) return fail(where, "'names' must be a list of dimension names");
      for (element item : names) {
        std::string_view name;
        if (item.get(name)) return fail(where, "'names' must be a list of dimension names");
        if (auto s = add_slot(std::string(name), "dimension"); !s) return s;
        entry_.dim_names.emplace_back(name);
      }
    }
    if (static_cast<int>(entry_.dim_names.size()) > entry_.min_rank - 1) {
      return fail(where, "names " + std::to_string(entry_.dim_names.size()) +
                             " dimensions but only dims after the batch can be named");
    }
    array starts;
    if (obj["start"].get(starts) || starts.size() == 0) {
      return fail(where_, "'start' must list the start shapes this operator can begin a task with");
    }
    for (element item : starts) {
      std::string_view name;
      if (item.get(name)) return fail(where_, "'start' must list start-shape names");
      auto it = std::find_if(catalog_.starts.begin(), catalog_.starts.end(),
                             [&](const StartShape& s) { return s.name == name; });
      if (it == catalog_.starts.end()) return fail(where_, "unknown start shape '" + std::string(name) + "'");
      const int rank = 1 + static_cast<int>(it->dims.size());
      if (entry_.rank != 0 ? rank != entry_.rank : rank < entry_.min_rank) {
        return fail(where_, "start shape '" + std::string(name) + "' has rank " +
                                std::to_string(rank) + ", which the input does not accept");
      }
      entry_.starts.push_back(static_cast<int>(it - catalog_.starts.begin()));
    }
    visible_ = entry_.slot_count;
    return Status::ok();
  }

  Status parse_params(object obj) {
    auto v = obj["params"];
    if (v.error() == simdjson::NO_SUCH_FIELD) return Status::ok();
    object params;
    if (v.get(params)) return fail(where_, "'params' must be an object");
    for (auto [key, value] : params) {
      ParamSpec spec;
      spec.name = std::string(key);
      const std::string where = where_ + ": params." + spec.name;
      if (auto s = parse_spec(value, spec, resolver(false), false, where); !s) return s;
      if (auto s = add_slot(spec.name, "parameter"); !s) return s;
      spec.slot = entry_.slot_count - 1;
      visible_ = entry_.slot_count;
      entry_.params.push_back(std::move(spec));
    }
    return Status::ok();
  }

  Status parse_rules(object obj) {
    if (auto v = obj["requires"]; v.error() != simdjson::NO_SUCH_FIELD) {
      array list;
      if (v.get(list)) return fail(where_, "'requires' must be a list of expressions");
      for (element item : list) {
        std::string_view text;
        if (item.get(text)) return fail(where_, "'requires' must be a list of expressions");
        auto expr = Expr::compile(text, resolver(false));
        if (!expr) return fail(where_ + ": requires", expr.status().message());
        entry_.requirements.push_back(std::move(expr).value());
      }
    }
    std::string_view shape_text;
    if (obj["shape"].get(shape_text)) return fail(where_, "'shape' must be a shape rule");
    auto call = compile_call(shape_text, resolver(false));
    if (!call) return fail(where_ + ": shape", call.status().message());
    auto rule = std::find_if(std::begin(kRules), std::end(kRules),
                             [&](const RuleShape& r) { return r.name == call.value().name; });
    if (rule == std::end(kRules)) return fail(where_, "unknown shape rule '" + call.value().name + "'");
    const int count = static_cast<int>(call.value().args.size());
    if (count < rule->min_args || (rule->max_args >= 0 && count > rule->max_args)) {
      return fail(where_, "shape rule " + std::string(rule->name) + "() takes " +
                              std::to_string(rule->min_args) +
                              (rule->max_args == rule->min_args ? "" : " or more") + " arguments");
    }
    entry_.shape = {rule->kind, std::move(call.value().args), std::string(shape_text)};
    if (auto v = obj["extra_inputs"]; v.error() != simdjson::NO_SUCH_FIELD) {
      array list;
      if (v.get(list) || list.size() > static_cast<std::size_t>(kMaxExtraInputs)) {
        return fail(where_, "'extra_inputs' must be a list of at most 3 shapes");
      }
      for (element item : list) {
        ExtraInput extra;
        std::string_view text;
        array dims;
        if (!item.get(text) && text == "input") {
          extra.like_input = true;
        } else if (!item.get(dims) && dims.size() > 0) {
          for (element dim : dims) {
            std::string_view dim_text;
            if (dim.get(dim_text)) return fail(where_, "an extra input's dims are expressions");
            auto expr = Expr::compile(dim_text, resolver(false));
            if (!expr) return fail(where_ + ": extra_inputs", expr.status().message());
            extra.dims.push_back(std::move(expr).value());
          }
        } else {
          return fail(where_, "an extra input is \"input\" or a list of dim expressions");
        }
        entry_.extra_inputs.push_back(std::move(extra));
      }
    }
    return Status::ok();
  }

  Status parse_cost(object obj) {
    object cost;
    const std::string where = where_ + ": cost";
    if (obj["cost"].get(cost)) return fail(where_, "'cost' must be an object");
    if (auto s = check_keys(cost, {"flops", "bytes", "temp", "kernels", "math"}, where); !s) return s;
    for (auto [key, target] : {std::pair<std::string_view, Expr*>{"flops", &entry_.flops},
                               {"bytes", &entry_.bytes}, {"temp", &entry_.temp}}) {
      std::string_view text;
      double number = 0;
      auto v = cost[key];
      if (key == "temp" && v.error() == simdjson::NO_SUCH_FIELD) continue;
      if (!v.get(text)) {
        auto expr = Expr::compile(text, resolver(true));
        if (!expr) return fail(where + "." + std::string(key), expr.status().message());
        *target = std::move(expr).value();
      } else if (v.error() == simdjson::SUCCESS && read_number(v.value_unsafe(), number)) {
        *target = Expr::constant(number);
      } else {
        return fail(where, "'" + std::string(key) + "' must be an expression");
      }
    }
    std::int64_t kernels = 0;
    if (cost["kernels"].error() || !read_int(cost["kernels"].value_unsafe(), kernels, 0, 1000)) {
      return fail(where, "'kernels' must be the number of kernels eager mode launches (0-1000)");
    }
    entry_.kernels = static_cast<int>(kernels);
    std::string_view math = "fp32";
    if (auto v = cost["math"]; v.error() != simdjson::NO_SUCH_FIELD && v.get(math)) {
      return fail(where, "'math' must be fp32, conv or none");
    }
    if (math == "fp32") entry_.math = MathKind::kFp32;
    else if (math == "conv") entry_.math = MathKind::kConv;
    else if (math == "none") entry_.math = MathKind::kNone;
    else return fail(where, "'math' must be fp32, conv or none");
    return Status::ok();
  }

  Status parse_templates(object obj) {
    std::string_view init, forward;
    if (auto v = obj["init"]; v.error() != simdjson::NO_SUCH_FIELD) {
      if (v.get(init) || init.empty()) return fail(where_, "'init' must be a Python expression");
      entry_.init = std::string(init);
    }
    if (obj["forward"].get(forward) || forward.empty()) {
      return fail(where_, "'forward' must be a Python expression");
    }
    entry_.forward = std::string(forward);
    auto init_names = template_names(entry_.init);
    if (!init_names) return fail(where_ + ": init", init_names.status().message());
    for (const std::string& name : init_names.value()) {
      const bool is_param = std::any_of(entry_.params.begin(), entry_.params.end(),
                                        [&](const ParamSpec& p) { return p.name == name; });
      if (!is_param) return fail(where_ + ": init", "'{" + name + "}' is not a parameter");
    }
    auto forward_names = template_names(entry_.forward);
    if (!forward_names) return fail(where_ + ": forward", forward_names.status().message());
    bool uses_x = false;
    for (const std::string& name : forward_names.value()) {
      if (name == "x") {
        uses_x = true;
        continue;
      }
      if (name == "self") {
        if (entry_.init.empty()) return fail(where_ + ": forward", "'{self}' needs an 'init'");
        continue;
      }
      if (name.size() == 2 && name[0] == 'y' && name[1] >= '1' &&
          name[1] - '0' <= static_cast<int>(entry_.extra_inputs.size())) {
        continue;
      }
      auto slot = entry_.slot_of(name);
      if (!slot || *slot == kSlotOut || *slot == kSlotOutRank || *slot == kSlotEsize ||
          (*slot >= kFirstSlotInN && *slot < kFirstSlotDim)) {
        return fail(where_ + ": forward", "'{" + name + "}' names nothing the forward can use");
      }
    }
    if (!uses_x) return fail(where_ + ": forward", "the forward must use '{x}'");
    if (!entry_.init.empty() &&
        std::find(forward_names.value().begin(), forward_names.value().end(), "self") ==
            forward_names.value().end()) {
      return fail(where_ + ": forward", "an operator with an 'init' must call '{self}'");
    }
    if (auto v = obj["helpers"]; v.error() != simdjson::NO_SUCH_FIELD) {
      array list;
      if (v.get(list)) return fail(where_, "'helpers' must be a list of helper names");
      for (element item : list) {
        std::string_view name;
        if (item.get(name)) return fail(where_, "'helpers' must be a list of helper names");
        auto it = std::find_if(catalog_.helpers.begin(), catalog_.helpers.end(),
                               [&](const Helper& h) { return h.name == name; });
        if (it == catalog_.helpers.end()) return fail(where_, "unknown helper '" + std::string(name) + "'");
        entry_.helpers.push_back(static_cast<int>(it - catalog_.helpers.begin()));
      }
    }
    return Status::ok();
  }

  const Catalog& catalog_;
  OpEntry& entry_;
  std::string file_;
  std::string where_;  // "operators.json: operator 'conv2d'" once the name is known
  int visible_ = 0;  // slots below this are defined at the point being parsed
};

Status parse_start_shapes(object root, Catalog& catalog, const std::string& file) {
  object starts;
  if (root["start_shapes"].get(starts) || starts.size() == 0) {
    return fail(file, "'start_shapes' must be a non-empty object");
  }
  for (auto [key, value] : starts) {
    StartShape start;
    start.name = std::string(key);
    const std::string where = file + ": start shape '" + start.name + "'";
    object body;
    if (value.get(body)) return fail(where, "must be an object with batch and dims");
    if (auto s = check_keys(body, {"batch", "dims"}, where); !s) return s;
    array batch;
    if (body["batch"].get(batch) || batch.size() != 2 ||
        !read_int(batch.at(0).value_unsafe(), start.batch_lo, 1, kMaxDimension) ||
        !read_int(batch.at(1).value_unsafe(), start.batch_hi, 1, kMaxDimension) ||
        start.batch_lo > start.batch_hi) {
      return fail(where, "'batch' must be [lo, hi] with 1 <= lo <= hi");
    }
    object dims;
    if (body["dims"].get(dims)) return fail(where, "'dims' must be an object of dimension specs");
    for (auto [dim_name, spec_value] : dims) {
      ParamSpec spec;
      spec.name = std::string(dim_name);
      spec.slot = static_cast<int>(start.dims.size());
      auto resolve = [&start](std::string_view name) -> std::optional<int> {
        for (const auto& dim : start.dims) {
          if (dim.name == name) return dim.slot;
        }
        return std::nullopt;
      };
      if (!is_identifier(spec.name) || resolve(spec.name) || spec.name == "batch") {
        return fail(where, "dimension '" + spec.name + "' is not a new identifier");
      }
      if (auto s = parse_spec(spec_value, spec, resolve, true, where + ": dims." + spec.name); !s) return s;
      start.dims.push_back(std::move(spec));
    }
    if (start.dims.size() > 5) return fail(where, "at most 5 dims after the batch");
    catalog.starts.push_back(std::move(start));
  }
  return Status::ok();
}

Status parse_helpers(object root, Catalog& catalog, const std::string& file) {
  auto v = root["helpers"];
  if (v.error() == simdjson::NO_SUCH_FIELD) return Status::ok();
  object helpers;
  if (v.get(helpers)) return fail(file, "'helpers' must be an object of Python sources");
  for (auto [key, value] : helpers) {
    Helper helper;
    helper.name = std::string(key);
    const std::string where = file + ": helper '" + helper.name + "'";
    std::string_view text;
    array lines;
    if (!value.get(text)) {
      helper.text = std::string(text);
    } else if (!value.get(lines)) {
      for (element line : lines) {
        if (line.get(text)) return fail(where, "lines must be strings");
        helper.text.append(text).push_back('\n');
      }
    } else {
      return fail(where, "must be Python source: a string or a list of lines");
    }
    if (helper.text.empty()) return fail(where, "is empty");
    if (helper.text.back() != '\n') helper.text.push_back('\n');
    catalog.helpers.push_back(std::move(helper));
  }
  return Status::ok();
}

}  // namespace

std::optional<int> OpEntry::slot_of(std::string_view slot_name) const {
  for (std::size_t i = 0; i < slot_names.size(); ++i) {
    if (slot_names[i] == slot_name) return static_cast<int>(i);
  }
  return std::nullopt;
}

std::optional<int> Catalog::find(std::string_view op_name) const {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == op_name) return static_cast<int>(i);
  }
  return std::nullopt;
}

std::vector<std::string> Catalog::families() const {
  std::vector<std::string> out;
  for (const auto& op : ops) {
    if (std::find(out.begin(), out.end(), op.family) == out.end()) out.push_back(op.family);
  }
  return out;
}

Result<Catalog> parse_catalog(std::string_view json, const std::string& path) {
  const std::string file = path.substr(path.find_last_of('/') + 1);
  simdjson::dom::parser parser;
  element root;
  if (auto error = parser.parse(json.data(), json.size(), true).get(root)) {
    return fail(file, std::string("invalid JSON: ") + simdjson::error_message(error));
  }
  if (auto duplicate = find_duplicate_key(root)) return fail(file, "duplicate key " + *duplicate);
  object top;
  if (root.get(top)) return fail(file, "must be a JSON object");
  if (auto s = check_keys(top, {"format", "torch_floor", "start_shapes", "helpers", "operators"}, file); !s) {
    return s;
  }
  std::string_view format;
  if (top["format"].get(format) || format != kFormat) {
    return fail(file, "'format' must be \"" + std::string(kFormat) + "\"");
  }
  Catalog catalog;
  catalog.path = path;
  std::string_view floor;
  if (auto v = top["torch_floor"]; v.error() != simdjson::NO_SUCH_FIELD) {
    if (v.get(floor) || floor.empty()) return fail(file, "'torch_floor' must be a version string");
    catalog.torch_floor = std::string(floor);
  }
  if (auto s = parse_start_shapes(top, catalog, file); !s) return s;
  if (auto s = parse_helpers(top, catalog, file); !s) return s;
  array ops;
  if (top["operators"].get(ops) || ops.size() == 0) return fail(file, "'operators' must be a non-empty list");
  std::size_t index = 0;
  for (element value : ops) {
    object obj;
    if (value.get(obj)) return fail(file + ": operator " + std::to_string(index), "must be an object");
    OpEntry entry;
    EntryParser entry_parser(catalog, entry, file, index++);
    if (auto s = entry_parser.parse(obj); !s) return s;
    if (catalog.find(entry.name)) return fail(file, "operator '" + entry.name + "' is defined twice");
    catalog.ops.push_back(std::move(entry));
  }
  return catalog;
}

Result<Catalog> load_catalog(const std::string& path) {
  std::string bytes;
  if (!read_whole_file(path, bytes)) return Status::error("cannot read catalog '" + path + "'");
  return parse_catalog(bytes, path);
}

std::string default_catalog_path() { return share_dir() + "/synth/operators.json"; }

Result<std::vector<int>> select_operators(const Catalog& catalog, std::string_view list) {
  std::vector<bool> chosen(catalog.ops.size(), false);
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view name = list.substr(start, comma - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    start = comma + 1;
    if (name.empty()) continue;
    bool found = false;
    for (std::size_t i = 0; i < catalog.ops.size(); ++i) {
      if (catalog.ops[i].name == name || catalog.ops[i].family == name) {
        chosen[i] = true;
        found = true;
      }
    }
    if (!found) {
      return Status::error("unknown operator or family '" + std::string(name) +
                           "' (cudaagent-synth --list shows the catalog)");
    }
  }
  std::vector<int> out;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    if (chosen[i]) out.push_back(static_cast<int>(i));
  }
  if (out.empty()) return Status::error("the operator list is empty");
  return out;
}

int compare_versions(std::string_view a, std::string_view b) {
  while (!a.empty() || !b.empty()) {
    auto take = [](std::string_view& s) {
      const std::size_t dot = s.find('.');
      std::string_view part = s.substr(0, dot);
      s = dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
      return part;
    };
    std::string_view pa = take(a), pb = take(b);
    std::int64_t na = 0, nb = 0;
    auto numeric = [](std::string_view s) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    const bool numeric_a = numeric(pa), numeric_b = numeric(pb);
    if (numeric_a && numeric_b && pa.size() < 12 && pb.size() < 12) {
      na = std::stoll(std::string(pa));
      nb = std::stoll(std::string(pb));
      if (na != nb) return na < nb ? -1 : 1;
    } else if (pa != pb) {
      if (pa.empty()) return -1;
      if (pb.empty()) return 1;
      return pa < pb ? -1 : 1;
    }
  }
  return 0;
}

}  // namespace cudaagent::synth
