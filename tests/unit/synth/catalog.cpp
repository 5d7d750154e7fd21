// The operator catalog: the shipped one covers what issue 5 asks for, and a broken entry is
// rejected with a message that names the file, the entry and the field.
#include "cudaagent/synth/catalog.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>

using namespace cudaagent;
using namespace cudaagent::synth;

namespace {

const std::string kShippedCatalog = std::string(CUDAAGENT_SOURCE_DIR) + "/share/synth/operators.json";

const Catalog& shipped() {
  static const Catalog catalog = [] {
    auto loaded = load_catalog(kShippedCatalog);
    REQUIRE_MESSAGE(loaded, loaded.status().message());
    return std::move(loaded).value();
  }();
  return catalog;
}

// A minimal valid catalog; `op` is spliced in as its second operator.
std::string catalog_with(const std::string& op, const std::string& top_extra = "") {
  return R"J({"format": "cudaagent-synth-catalog/1", )J" + top_extra + R"J(
    "start_shapes": {"image": {"batch": [1, 8], "dims": {"C": [3, 16], "H": [8, 32], "W": "H"}}},
    "operators": [
      {"name": "relu", "family": "activation", "doc": "relu", "input": {"min_rank": 1},
       "start": ["image"], "shape": "same()", "forward": "torch.relu({x})",
       "cost": {"flops": "in", "bytes": "esize*(in + out)", "kernels": 1}})J" +
         (op.empty() ? "" : ",\n" + op) + "]}";
}

// A conv2d entry with one field replaced (field: its JSON text without the key) or added.
std::string conv_with(const std::string& field, const std::string& value) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"name", R"J("conv2d")J"},
      {"family", R"J("convolution")J"},
      {"doc", R"J("conv")J"},
      {"input", R"J({"rank": 4, "names": ["C", "H", "W"]})J"},
      {"start", R"J(["image"])J"},
      {"params", R"J({"in_channels": "C", "out_channels": [8, 64], "kernel_size": {"choice": [1, 3]}})J"},
      {"shape", R"J("conv(out_channels, kernel_size, 1, 0, 1)")J"},
      {"init", R"J("nn.Conv2d({in_channels}, {out_channels}, {kernel_size})")J"},
      {"forward", R"J("{self}({x})")J"},
      {"cost", R"J({"flops": "2*out*in_channels*kernel_size^2", "bytes": "esize*(in + out)", "kernels": 1, "math": "conv"})J"},
  };
  bool replaced = false;
  for (auto& [k, v] : fields) {
    if (k == field) {
      v = value;
      replaced = true;
    }
  }
  if (!replaced) fields.emplace_back(field, value);
  std::string out = "{";
  for (const auto& [k, v] : fields) {
    if (v.empty()) continue;  // an empty value removes the field
    out += (out.size() > 1 ? ", " : "") + std::string("\"") + k + "\": " + v;
  }
  return out + "}";
}

std::string load_error(const std::string& json) {
  auto catalog = parse_catalog(json, "/some/dir/operators.json");
  REQUIRE_FALSE(catalog);
  return catalog.status().message();
}

}  // namespace

TEST_CASE("the shipped catalog has what issue 5 asks for") {
  const Catalog& c = shipped();
  std::set<std::string> names;
  std::size_t torch_ops = 0, blocks = 0, activations = 0;
  for (const OpEntry& op : c.ops) {
    names.insert(op.name);
    if (op.family == "transformer") ++blocks;
    else ++torch_ops;
    if (op.family == "activation") ++activations;
    CHECK_MESSAGE(op.name.find("dropout") == std::string::npos, op.name);
    CHECK_MESSAGE(op.forward.find("dropout") == std::string::npos, op.name);
  }
  CHECK(torch_ops >= 80);
  CHECK(blocks >= 10);
  CHECK(activations >= 15);
  for (const char* required :
       {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "linear", "matmul", "bmm", "batch_norm2d", "layer_norm", "group_norm", "instance_norm2d",
        "rms_norm", "max_pool2d", "avg_pool2d", "sum", "mean", "softmax", "log_softmax",
        "logsumexp", "add_scalar", "mul_scalar", "add_bias", "rmsnorm", "rotary_embedding",
        "gated_mlp", "multi_head_attention", "grouped_query_attention"}) {
    CHECK_MESSAGE(names.count(required) == 1, required);
  }
  // Entries that need torch >= 2 say so, and hand-written attention does not.
  CHECK(c.ops[static_cast<std::size_t>(*c.find("sdpa_attention"))].min_torch == "2.0");
  CHECK(c.ops[static_cast<std::size_t>(*c.find("multi_head_attention"))].min_torch.empty());
  CHECK(c.torch_floor == "1.13");
}

TEST_CASE("a minimal catalog loads, and templates may only name what exists") {
  auto catalog = parse_catalog(catalog_with(conv_with("name", R"J("conv2d")J")), "x.json");
  REQUIRE_MESSAGE(catalog, catalog.status().message());
  const OpEntry& conv = catalog.value().ops[1];
  CHECK(conv.rank == 4);
  CHECK(conv.dim_names == std::vector<std::string>{"C", "H", "W"});
  CHECK(conv.params.size() == 3);
  CHECK(conv.math == MathKind::kConv);
  CHECK(conv.params[1].kind == ParamSpec::Kind::kSize);
  CHECK(conv.params[1].lo == 8);
  CHECK(conv.params[2].choices == std::vector<double>{1, 3});
}

TEST_CASE("bad catalog entries are rejected with the entry and field named") {
  struct Row {
    std::string json;
    std::string expected;  // a part of the message
  };
  const std::vector<Row> rows = {
      {"{", "operators.json: invalid JSON"},
      {R"J({"format": "other", "start_shapes": {}, "operators": []})J", "'format' must be"},
      {catalog_with("", R"J("surprise": 1,)J"), "unknown field 'surprise'"},
      {catalog_with(conv_with("cost", R"J({"flops": "2*out*kernal_size", "bytes": "in", "kernels": 1})J")),
       "operator 'conv2d': cost.flops: unknown name 'kernal_size'"},
      {catalog_with(conv_with("cost", R"J({"flops": "out", "bytes": "in", "kernels": 1, "speed": 2})J")),
       "operator 'conv2d': cost: unknown field 'speed'"},
      {catalog_with(conv_with("cost", R"J({"flops": "out", "bytes": "in"})J")), "'kernels' must be"},
      {catalog_with(conv_with("cost", R"J({"flops": "out", "bytes": "in", "kernels": 1, "math": "int8"})J")),
       "'math' must be fp32, conv or none"},
      {catalog_with(conv_with("shape", R"J("convolve(out_channels)")J")), "unknown shape rule 'convolve'"},
      {catalog_with(conv_with("shape", R"J("conv(out_channels, 3)")J")), "conv() takes 5 arguments"},
      {catalog_with(conv_with("shape", R"J("conv(out, 3, 1, 0, 1)")J")), "shape: unknown name 'out'"},
      {catalog_with(conv_with("init", R"J("nn.Conv2d({C}, {out_channels})")J")), "init: '{C}' is not a parameter"},
      {catalog_with(conv_with("init", R"J("nn.Conv2d({in_channels")J")), "init: unclosed '{'"},
      {catalog_with(conv_with("forward", R"J("torch.relu(y)")J")), "the forward must use '{x}'"},
      {catalog_with(conv_with("forward", R"J("{x}")J")), "an operator with an 'init' must call '{self}'"},
      {catalog_with(conv_with("forward", R"J("{self}({x}, {y1})")J")), "'{y1}' names nothing"},
      {catalog_with(conv_with("requires", R"J(["H > kernal"])J")), "requires: unknown name 'kernal'"},
      {catalog_with(conv_with("requries", R"J(["H > 1"])J")), "unknown field 'requries'"},
      {catalog_with(conv_with("start", R"J(["volume"])J")), "unknown start shape 'volume'"},
      {catalog_with(conv_with("input", R"J({"rank": 3, "names": ["C", "L"]})J")),
       "start shape 'image' has rank 4, which the input does not accept"},
      {catalog_with(conv_with("input", R"J({"rank": 4, "min_rank": 2})J")), "exactly one of 'rank' and 'min_rank'"},
      {catalog_with(conv_with("input", R"J({"rank": 4, "names": ["A", "B", "C", "D"]})J")),
       "only dims after the batch can be named"},
      {catalog_with(conv_with("params", R"J({"self": [1, 2]})J")),
       "parameter 'self' is a name the generated Python uses"},
      {catalog_with(conv_with("params", R"J({"C": [1, 2]})J")), "parameter 'C' is defined twice"},
      {catalog_with(conv_with("params", R"J({"k": [9, 2]})J")), "size range has lo > hi"},
      {catalog_with(conv_with("params", R"J({"k": [5, 7, 8]})J")), "holds no multiple of 8"},
      {catalog_with(conv_with("params", R"J({"a": "b + 1", "b": [1, 2]})J")), "params.a: unknown name 'b'"},
      {catalog_with(conv_with("params", R"J({"a": {"range": [1, 2], "choice": [1]}})J")), "params.a: expected"},
      {catalog_with(conv_with("params", R"J({"a": {"bool": 2}})J")), "bool takes a probability"},
      {catalog_with(conv_with("params", R"J({"a": {"fancy": 2}})J")), "unknown parameter kind 'fancy'"},
      {catalog_with(conv_with("name", R"J("Conv2D")J")), "'name' must be a lower-case identifier"},
      {catalog_with(conv_with("name", R"J("relu")J")), "operator 'relu' is defined twice"},
      {catalog_with(conv_with("doc", "")), "'doc' must be a non-empty string"},
      {catalog_with(conv_with("helpers", R"J(["Missing"])J")), "unknown helper 'Missing'"},
      {catalog_with(conv_with("min_torch", R"J("new")J")), "'min_torch' must be a version"},
      {catalog_with(conv_with("extra_inputs", R"J(["output"])J")), "an extra input is"},
      {R"J({"format": "cudaagent-synth-catalog/1", "format": "x"})J", "duplicate key"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.json);
    const std::string message = load_error(row.json);
    CHECK_MESSAGE(message.find(row.expected) != std::string::npos, message);
    CHECK(message.rfind("operators.json: ", 0) == 0);  // the file's name comes first
  }
}

TEST_CASE("an entry without a name is located by its position") {
  const std::string message = load_error(catalog_with(R"J({"family": "x"})J"));
  CHECK(message == "operators.json: operator 1: 'name' must be a lower-case identifier");
}

TEST_CASE("select_operators takes operator and family names") {
  const Catalog& c = shipped();
  auto some = select_operators(c, "conv2d, relu,conv2d");
  REQUIRE(some);
  CHECK(some.value() == std::vector<int>{*c.find("conv2d"), *c.find("relu")});
  auto family = select_operators(c, "pooling");
  REQUIRE(family);
  for (int index : family.value()) CHECK(c.ops[static_cast<std::size_t>(index)].family == "pooling");
  CHECK(family.value().size() >= 6);
  auto unknown = select_operators(c, "relu,conv4d");
  REQUIRE_FALSE(unknown);
  CHECK(unknown.status().message().find("unknown operator or family 'conv4d'") != std::string::npos);
  CHECK_FALSE(select_operators(c, " , "));
}

TEST_CASE("versions compare numerically") {
  CHECK(compare_versions("1.13", "2.0") < 0);
  CHECK(compare_versions("2.4", "2.10") < 0);
  CHECK(compare_versions("2.0", "2.0") == 0);
  CHECK(compare_versions("2.0.1", "2.0") > 0);
  CHECK(compare_versions("1.13", "1.9") > 0);
}
