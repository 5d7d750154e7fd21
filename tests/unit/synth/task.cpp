// Task records: the Python source's form (Model, get_inputs, get_init_inputs), init-argument
// naming, literals, and the record contract that cudaagent-filter, -dedup and -verify read.
#include "cudaagent/synth/task.h"

#include <doctest/doctest.h>

#include "cudaagent/base/sha256.h"
#include "test_support.h"

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

std::vector<OpRequest> chain(std::initializer_list<const char*> names) {
  std::vector<OpRequest> out;
  for (const char* name : names) out.push_back({*catalog().find(name), {}});
  return out;
}

Composition compose(std::initializer_list<const char*> names, std::int64_t batch = 4) {
  ComposeSettings settings;
  settings.batch = batch;
  settings.max_dim = 32;
  const Composer composer(catalog(), settings);
  auto c = composer.compose_chain(chain(names), 11, 0);
  REQUIRE_MESSAGE(c, c.status().message());
  return std::move(c).value();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("python numbers: integers when integral, floats that read back in Python") {
  CHECK(python_number(3) == "3");
  CHECK(python_number(-12) == "-12");
  CHECK(python_number(0.5) == "0.5");
  CHECK(python_number(1e-5) == "1e-05");
  CHECK(python_number(2, true) == "2.0");
  CHECK(python_number(-0.25, true) == "-0.25");
}

TEST_CASE("the source has KernelBench's form, sizes as init arguments and fixed input shapes") {
  const Composition c = compose({"conv2d", "batch_norm2d", "relu"});
  const std::string py = render_model_py(catalog(), c);
  CHECK(contains(py, "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"));
  CHECK(contains(py, "class Model(nn.Module):\n    def __init__(self, in_channels, out_channels, "
                     "kernel_size, stride, padding, dilation, num_features):\n        super().__init__()\n"));
  CHECK(contains(py, "        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride"));
  CHECK(contains(py, "        self.batch_norm2d = nn.BatchNorm2d(num_features)\n"));
  CHECK(contains(py, "    def forward(self, x):\n        x = self.conv2d(x)\n        x = self.batch_norm2d(x)\n"
                     "        x = torch.relu(x)\n        return x\n"));
  const Shape& in = c.ops[0].in;
  CHECK(contains(py, "def get_inputs():\n    return [torch.randn(4, " + std::to_string(in[1]) + ", " +
                         std::to_string(in[2]) + ", " + std::to_string(in[3]) + ")]\n"));
  // get_init_inputs lists the values in the order of the signature.
  const OpEntry& conv = catalog().ops[static_cast<std::size_t>(c.ops[0].entry)];
  auto value = [&](const char* name) {
    return python_number(c.ops[0].slots[static_cast<std::size_t>(*conv.slot_of(name))]);
  };
  CHECK(contains(py, "def get_init_inputs():\n    return [" + value("in_channels") + ", " +
                         value("out_channels") + ", " + value("kernel_size") + ", " + value("stride") +
                         ", " + value("padding") + ", " + value("dilation") + ", " + value("out_channels") +
                         "]\n"));
  // Booleans are literals, never init arguments.
  CHECK((contains(py, "bias=True)") || contains(py, "bias=False)")));
}

TEST_CASE("repeated operators and shared parameter names get the position as a suffix") {
  const Composition c = compose({"linear", "relu", "linear"});
  const std::string py = render_model_py(catalog(), c);
  CHECK(contains(py, "def __init__(self, in_features_1, out_features_1, in_features_3, out_features_3):"));
  CHECK(contains(py, "self.linear_1 = nn.Linear(in_features_1, out_features_1"));
  CHECK(contains(py, "self.linear_3 = nn.Linear(in_features_3, out_features_3"));
  CHECK(contains(py, "x = self.linear_1(x)\n        x = torch.relu(x)\n        x = self.linear_3(x)\n"));
}

TEST_CASE("extra inputs become forward arguments and get_inputs entries, helpers appear once") {
  const Composition c = compose({"rmsnorm", "bmm", "mul_tensor", "rmsnorm"});
  const std::string py = render_model_py(catalog(), c);
  CHECK(contains(py, "def forward(self, x, y1, y2):"));
  CHECK(contains(py, "x = torch.bmm(x, y1)"));
  CHECK(contains(py, "x = x * y2"));
  const std::size_t first = py.find("class RMSNorm(nn.Module):");
  REQUIRE(first != std::string::npos);
  CHECK(py.find("class RMSNorm(nn.Module):", first + 1) == std::string::npos);
  CHECK(first < py.find("class Model(nn.Module):"));
  CHECK(std::count(py.begin(), py.end(), '\n') > 20);
  CHECK(contains(py, "return [torch.randn(4, "));
}

TEST_CASE("the record follows cudaagent-records(5)") {
  const Composition c = compose({"layer_norm", "gelu"});
  const std::string line = task_record(catalog(), c, {42, 7, "random", {}});
  REQUIRE(line.back() == '\n');
  REQUIRE(testing::is_valid_json(line));
  simdjson::dom::parser parser;
  simdjson::dom::element record = parser.parse(line);
  const std::string model_py(record["task"]["model_py"].get_string().value());
  CHECK(std::string(record["id"].get_string().value()) == sha256_hex(model_py));
  CHECK(model_py == render_model_py(catalog(), c));
  CHECK(std::string(record["task"]["source"].get_string().value()) == "synth");
  auto ops = record["task"]["ops"].get_array().value();
  REQUIRE(ops.size() == 2);
  CHECK(std::string(ops.at(0).get_string().value()) == "layer_norm");
  auto meta = record["task"]["meta"];
  CHECK(meta["depth"].get_int64().value() == 2);
  CHECK(meta["seed"].get_int64().value() == 42);
  CHECK(meta["index"].get_int64().value() == 7);
  CHECK(std::string(meta["dtype"].get_string().value()) == "float32");
  CHECK(std::string(meta["composer"].get_string().value()) == "random");
  CHECK(meta["est_eager_ms"].get_double().value() == doctest::Approx(c.est_ms).epsilon(1e-3));
  CHECK(meta["flops"].get_int64().value() == static_cast<std::int64_t>(std::llround(c.flops)));
  CHECK(meta["bytes"].get_int64().value() == static_cast<std::int64_t>(std::llround(c.bytes)));
  CHECK(meta["batch"].get_int64().value() == 4);
  CHECK(std::string(meta["min_torch"].get_string().value()) == "1.13");
  auto out = meta["output_shape"].get_array().value();
  CHECK(out.size() == c.ops.back().out.size());
  CHECK(meta["input_shapes"].get_array().value().size() == 1);
  CHECK(record["task"]["meta"]["llm_model"].error() == simdjson::NO_SUCH_FIELD);
  // Keys in a fixed order, so equal compositions give byte-equal records.
  CHECK(line.rfind(R"({"id":")", 0) == 0);
  CHECK(contains(line, R"(","task":{"source":"synth","model_py":")"));
}

TEST_CASE("a task needing torch 2 says so in its record") {
  const Composition c = compose({"sdpa_attention", "relu"});
  CHECK(c.min_torch == "2.0");
  const std::string line = task_record(catalog(), c, {1, 0, "llm", "some-model"});
  CHECK(contains(line, R"("min_torch":"2.0")"));
  CHECK(contains(line, R"("composer":"llm","llm_model":"some-model")"));
}
