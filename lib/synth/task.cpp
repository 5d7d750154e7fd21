// Writing a composition as Python and as a task record. Templates are filled here: in a
// constructor a numeric parameter becomes an init argument of Model (named after the parameter,
// with the operator's position appended when two operators share the name); everywhere else a
// parameter is written as a literal.
#include "cudaagent/synth/task.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "cudaagent/base/json_writer.h"
#include "cudaagent/base/sha256.h"

namespace cudaagent::synth {
namespace {

bool is_init_argument(const ParamSpec& spec) {
  return spec.kind != ParamSpec::Kind::kBool && spec.kind != ParamSpec::Kind::kText;
}

std::string param_literal(const ParamSpec& spec, double value) {
  switch (spec.kind) {
    case ParamSpec::Kind::kBool: return value != 0 ? "True" : "False";
    case ParamSpec::Kind::kText: return spec.texts[static_cast<std::size_t>(value)];
    case ParamSpec::Kind::kFloat: return python_number(value, true);
    default: return python_number(value);
  }
}

const ParamSpec* find_param(const OpEntry& entry, const std::string& name) {
  for (const auto& p : entry.params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// Fills "{name}" placeholders through `lookup`; "{{" and "}}" become single braces.
template <class Lookup>
std::string fill(const std::string& text, const Lookup& lookup) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      out.push_back(c);
      ++i;
    } else if (c == '{') {
      const std::size_t close = text.find('}', i);  // the catalog loader checked it exists
      out += lookup(text.substr(i + 1, close - i - 1));
      i = close;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Placeholder names of a template, in order (the loader validated the syntax).
std::vector<std::string> placeholders(const std::string& text) {
  std::vector<std::string> names;
  fill(text, [&](const std::string& name) {
    names.push_back(name);
    return std::string();
  });
  return names;
}

std::string randn(const Shape& shape) {
  std::string out = "torch.randn(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + ")";
}

}  // namespace

std::string python_number(double value, bool force_float) {
  if (!force_float && std::fabs(value) < 9e15 && std::floor(value) == value) {
    return std::to_string(static_cast<std::int64_t>(value));
  }
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  std::string text(buffer);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string render_model_py(const Catalog& catalog, const Composition& c) {
  const std::size_t n = c.ops.size();
  // Attribute and argument names: plain when unique in the task, else suffixed with the position.
  std::map<std::string, int> entry_uses, argument_uses;
  for (const PlacedOp& op : c.ops) {
    const OpEntry& e = catalog.ops[static_cast<std::size_t>(op.entry)];
    ++entry_uses[e.name];
    std::set<std::string> seen;
    for (const std::string& name : placeholders(e.init)) {
      const ParamSpec* spec = find_param(e, name);
      if (spec == nullptr) continue;
      if (is_init_argument(*spec) && seen.insert(name).second) ++argument_uses[name];
    }
  }
  std::string init_lines, forward_lines, signature, init_values;
  std::vector<std::string> forward_args{"x"};
  std::set<int> helpers;
  std::vector<Shape> inputs{c.ops.front().in};
  for (std::size_t i = 0; i < n; ++i) {
    const PlacedOp& op = c.ops[i];
    const OpEntry& e = catalog.ops[static_cast<std::size_t>(op.entry)];
    const std::string suffix = "_" + std::to_string(i + 1);
    const std::string attr = "self." + e.name + (entry_uses[e.name] > 1 ? suffix : "");
    helpers.insert(e.helpers.begin(), e.helpers.end());
    if (!e.init.empty()) {
      std::set<std::string> declared;
      const std::string constructor = fill(e.init, [&](const std::string& name) {
        const ParamSpec* found = find_param(e, name);
        if (found == nullptr) return std::string("None");  // the catalog loader rules this out
        const ParamSpec& spec = *found;
        const double value = op.slots[static_cast<std::size_t>(spec.slot)];
        if (!is_init_argument(spec)) return param_literal(spec, value);
        const std::string arg = name + (argument_uses[name] > 1 ? suffix : "");
        if (declared.insert(name).second) {
          signature += ", " + arg;
          init_values += (init_values.empty() ? "" : ", ") + param_literal(spec, value);
        }
        return arg;
      });
      init_lines += "        " + attr + " = " + constructor + "\n";
    }
    const std::size_t first_extra = forward_args.size();
    for (const Shape& extra : op.extras) {
      forward_args.push_back("y" + std::to_string(forward_args.size()));
      inputs.push_back(extra);
    }
    const std::string expression = fill(e.forward, [&](const std::string& name) -> std::string {
      if (name == "x") return "x";
      if (name == "self") return attr;
      if (name.size() == 2 && name[0] == 'y') {
        return forward_args[first_extra + static_cast<std::size_t>(name[1] - '1')];
      }
      if (const ParamSpec* spec = find_param(e, name)) {
        return param_literal(*spec, op.slots[static_cast<std::size_t>(spec->slot)]);
      }
      return python_number(op.slots[static_cast<std::size_t>(*e.slot_of(name))]);
    });
    forward_lines += "        x = " + expression + "\n";
  }

  std::string chain;
  for (const PlacedOp& op : c.ops) {
    chain += (chain.empty() ? "" : " -> ") + catalog.ops[static_cast<std::size_t>(op.entry)].name;
  }
  std::string py = "# Generated by cudaagent-synth: " + chain + "\n";
  py += "import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n";
  for (int h : helpers) py += catalog.helpers[static_cast<std::size_t>(h)].text + "\n\n";
  py += "class Model(nn.Module):\n";
  py += "    def __init__(self" + signature + "):\n        super().__init__()\n" + init_lines + "\n";
  std::string args;
  for (const std::string& a : forward_args) args += ", " + a;
  py += "    def forward(self" + args + "):\n" + forward_lines + "        return x\n\n\n";
  py += "def get_inputs():\n    return [";
  for (std::size_t i = 0; i < inputs.size(); ++i) py += (i ? ", " : "") + randn(inputs[i]);
  py += "]\n\n\ndef get_init_inputs():\n    return [" + init_values + "]\n";
  return py;
}

std::string task_record(const Catalog& catalog, const Composition& c, const TaskProvenance& provenance) {
  const std::string model_py = render_model_py(catalog, c);
  std::string out;
  JsonWriter w(out);
  auto shape = [&w](const Shape& s) {
    w.begin_array();
    for (auto d : s) w.value(d);
    w.end_array();
  };
  w.begin_object().field("id", sha256_hex(model_py)).key("task").begin_object();
  w.field("source", "synth").field("model_py", model_py).key("ops").begin_array();
  for (const PlacedOp& op : c.ops) w.value(catalog.ops[static_cast<std::size_t>(op.entry)].name);
  w.end_array().key("meta").begin_object();
  w.field("depth", static_cast<std::int64_t>(c.ops.size()));
  w.field("seed", static_cast<std::int64_t>(provenance.seed));
  w.field("index", static_cast<std::int64_t>(provenance.index));
  w.field("composer", provenance.composer);
  if (!provenance.llm_model.empty()) w.field("llm_model", provenance.llm_model);
  w.field("est_eager_ms", std::round(c.est_ms * 1e4) / 1e4);
  w.field("flops", static_cast<std::int64_t>(std::llround(c.flops)));
  w.field("bytes", static_cast<std::int64_t>(std::llround(c.bytes)));
  w.field("dtype", "float32");
  w.field("batch", c.batch);
  w.key("input_shapes").begin_array();
  shape(c.ops.front().in);
  for (const PlacedOp& op : c.ops) {
    for (const Shape& extra : op.extras) shape(extra);
  }
  w.end_array().key("output_shape");
  shape(c.ops.back().out);
  w.field("min_torch", c.min_torch);
  // Each operator's share of the estimate, so measured times can calibrate the device model
  // (bench/calibrate_synth.py): which throughput its FLOPs run at, its bytes and kernels.
  w.key("costs").begin_array();
  for (const PlacedOp& op : c.ops) {
    const OpEntry& entry = catalog.ops[static_cast<std::size_t>(op.entry)];
    const char* math = entry.math == MathKind::kConv ? "conv" : entry.math == MathKind::kFp32 ? "fp32" : "none";
    w.begin_object().field("op", entry.name).field("math", math);
    w.field("flops", std::round(op.flops)).field("bytes", std::round(op.bytes));
    w.field("kernels", static_cast<std::int64_t>(entry.kernels)).end_object();
  }
  w.end_array();
  w.end_object().end_object().end_object();
  out.push_back('\n');
  return out;
}

}  // namespace cudaagent::synth
