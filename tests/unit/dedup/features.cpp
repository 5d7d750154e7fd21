// The AST helper against the real python3: what the normalisation erases (names, literals,
// docstrings, comments, annotations, import spellings) and what it keeps (the torch API, keyword
// names, structure), syntax errors as answers, and a helper that dies, hangs or lies as a Status.
#include "cudaagent/dedup/features.h"

#include <doctest/doctest.h>

#include <string>

#include "cudaagent/base/paths.h"
#include "cudaagent/dedup/measure.h"
#include "test_support.h"

using cudaagent::AstTokenizer;
using cudaagent::fingerprint_similarity;
using cudaagent::make_fingerprint;
using cudaagent::ParsedSource;

namespace {

const std::string kConvTask = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolution, ReLU, bias."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        return x + self.bias


batch_size = 16
in_channels, out_channels = 3, 32
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, 64, 64)]


def get_init_inputs():
    return [in_channels, out_channels, 3, bias_shape]
)";

// kConvTask with every user name changed (class, parameters, attributes, locals, globals, even
// `self`), other literals, no docstring, a comment, annotations, and other import spellings.
const std::string kConvTaskRenamed = R"(import torch
from torch import nn


class Net(nn.Module):
    def __init__(me, cin: int, cout: int, k: int, shape: tuple) -> None:
        super().__init__()
        me.layer = torch.nn.Conv2d(cin, cout, k, padding=2)  # same layer
        me.shift = nn.Parameter(torch.randn(shape))

    def forward(me, inp: torch.Tensor) -> torch.Tensor:
        inp = me.layer(inp)
        inp = torch.relu(inp)
        return inp + me.shift


n = 128
cin, cout = 64, 7
shape = (cout, 1, 1)


def get_inputs():
    return [torch.randn(n, cin, 512, 256)]


def get_init_inputs():
    return [cin, cout, 5, shape]
)";

const std::string kMatmulSoftmax = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        scores = torch.matmul(a, b.transpose(-2, -1))
        return torch.softmax(scores / 8.0, dim=-1)


def get_inputs():
    return [torch.randn(4, 128, 64), torch.randn(4, 128, 64)]


def get_init_inputs():
    return []
)";

AstTokenizer start_helper() {
  auto started = cudaagent::start_ast_tokenizer("");
  REQUIRE_MESSAGE(started, started.status().message());
  return std::move(started).value();
}

ParsedSource parse(AstTokenizer& helper, const std::string& source) {
  auto parsed = helper.parse(source);
  REQUIRE_MESSAGE(parsed, parsed.status().message());
  REQUIRE_MESSAGE(parsed.value().parsed, parsed.value().error);
  return parsed.value();
}

double similarity(AstTokenizer& helper, const std::string& a, const std::string& b) {
  const ParsedSource x = parse(helper, a), y = parse(helper, b);
  return fingerprint_similarity(make_fingerprint(x.tokens, x.ops),
                                make_fingerprint(y.tokens, y.ops));
}

std::string tokens(AstTokenizer& helper, const std::string& source) {
  return parse(helper, source).tokens;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("renaming, literals, docstrings, comments, annotations and import spelling are erased") {
  AstTokenizer helper = start_helper();
  CHECK(tokens(helper, kConvTask) == tokens(helper, kConvTaskRenamed));
  CHECK(similarity(helper, kConvTask, kConvTaskRenamed) == 1.0);
  // Aliases resolve to the imported path: F.relu, functional.relu and the full path agree.
  CHECK(tokens(helper, "import torch.nn.functional as F\ny = F.relu(x)\n") ==
        tokens(helper, "from torch.nn import functional\ny = functional.relu(x)\n"));
  CHECK(tokens(helper, "from torch.nn import functional as G\nz = G.relu(w)\n") ==
        tokens(helper, "import torch\nz = torch.nn.functional.relu(w)\n"));
  // A number, a negative one, a shape tuple, a nested list of numbers: one literal each.
  const std::string number = tokens(helper, "k = 3\n");
  for (const char* literal : {"k = -1\n", "k = (3, 5)\n", "k = [[1, 2.5], [3, -4]]\n"}) {
    CHECK(tokens(helper, literal) == number);
  }
  CHECK(tokens(helper, "k = (n, 5)\n") != number);  // a name in it is code, not a literal
  CHECK(tokens(helper, "k = 'same'\n") == tokens(helper, "k = \"other\"\n"));
  CHECK(tokens(helper, "k = True\n") != tokens(helper, "k = False\n"));  // flags are kept
  // A user name that shadows a builtin is still a user name.
  CHECK(tokens(helper, "def f(input):\n    return input * 2\n") ==
        tokens(helper, "def f(value):\n    return value * 3\n"));
}

TEST_CASE("the torch API, keyword names and structure are kept") {
  AstTokenizer helper = start_helper();
  const std::string tokens_of_conv = tokens(helper, kConvTask);
  CHECK(tokens_of_conv.find("api:torch.nn.Conv2d") != std::string::npos);
  CHECK(tokens_of_conv.find("api:torch.relu") != std::string::npos);
  CHECK(tokens_of_conv.find("kw:padding") != std::string::npos);
  CHECK(tokens_of_conv.find("in_channels") == std::string::npos);  // user names are gone
  // The ops are the model's: not the input functions' torch.randn, not the base class, not
  // super().__init__.
  CHECK(parse(helper, kConvTask).ops ==
        "api:torch.nn.Conv2d api:torch.nn.Parameter api:torch.randn api:torch.relu");
  // So how the inputs are drawn barely matters, but which op the model runs does.
  const std::string uniform_inputs =
      replaced(kConvTask, "return [torch.randn(", "return [torch.rand(");
  CHECK(parse(helper, uniform_inputs).ops == parse(helper, kConvTask).ops);
  CHECK(similarity(helper, kConvTask, uniform_inputs) > 0.9);
  // Another activation is another task, not a near-duplicate.
  const double sigmoid =
      similarity(helper, kConvTask, replaced(kConvTask, "torch.relu", "torch.sigmoid"));
  CHECK(sigmoid < 0.9);
  CHECK(sigmoid > 0.5);
  // So is another keyword argument, or one more operation.
  CHECK(similarity(helper, kConvTask, replaced(kConvTask, "padding=1", "stride=1")) < 1.0);
  CHECK(similarity(helper, kConvTask,
                   replaced(kConvTask, "return x + self.bias",
                            "return torch.tanh(x + self.bias)")) < 0.95);
  // Unrelated tasks share little beyond the KernelBench boilerplate.
  CHECK(similarity(helper, kConvTask, kMatmulSoftmax) < 0.4);
}

TEST_CASE("sources that are not modules are answers, not failures") {
  AstTokenizer helper = start_helper();
  for (const std::string& source : {std::string("def f(:\n    pass\n"), std::string("x = (1,\n"),
                                    std::string("  indented = 1\n"), std::string("x = 1\0", 6),
                                    "x = " + std::string(300, '(') + "1" + std::string(300, ')')}) {
    CAPTURE(source);
    auto parsed = helper.parse(source);
    REQUIRE_MESSAGE(parsed, parsed.status().message());
    CHECK_FALSE(parsed.value().parsed);
    CHECK_FALSE(parsed.value().error.empty());
  }
  auto parsed = helper.parse("def f(:\n    pass\n");
  REQUIRE(parsed);
  CHECK(parsed.value().error.find("SyntaxError") == 0);
  CHECK(parsed.value().error.find("line 1") != std::string::npos);
  // The helper keeps serving after bad input, and non-ASCII text reaches it intact.
  CHECK(tokens(helper, "s = 'h\xc3\xa9llo \xe2\x9c\x93'\n") == "Assign Name Str");
  const ParsedSource empty =
      parse(helper, "\"\"\"A docstring.\"\"\"\nimport torch  # and a comment\n");
  CHECK(empty.tokens.empty());
  CHECK(empty.ops.empty());
}

TEST_CASE("a helper that cannot start, dies, hangs or speaks another version is a Status") {
  cudaagent::testing::TempDir dir;
  auto missing = AstTokenizer::start("/nonexistent/python3", "x.py", 5);
  REQUIRE_FALSE(missing);
  CHECK(missing.status().message().find("/nonexistent/python3") != std::string::npos);

  const std::string liar = dir.file("liar.py");
  cudaagent::testing::write_file(liar, "print('{\"version\": \"ast-tokens-0\"}', flush=True)\n");
  auto old = AstTokenizer::start("python3", liar, 5);
  REQUIRE_FALSE(old);
  CHECK(old.status().message().find("ast-tokens-0") != std::string::npos);

  const std::string dies = dir.file("dies.py");
  cudaagent::testing::write_file(
      dies,
      "import sys\nprint('{\"version\": \"ast-tokens-1\"}', flush=True)\n"
      "sys.stdin.buffer.readline()\nsys.stderr.write('boom: out of luck\\n')\nsys.exit(3)\n");
  auto dying = AstTokenizer::start("python3", dies, 5);
  REQUIRE_MESSAGE(dying, dying.status().message());
  auto answer = dying.value().parse("x = 1\n");
  REQUIRE_FALSE(answer);
  CHECK(answer.status().message().find("exited with code 3") != std::string::npos);
  CHECK(answer.status().message().find("boom: out of luck") != std::string::npos);
  CHECK_FALSE(dying.value().parse("x = 1\n"));  // and it stays failed

  const std::string hangs = dir.file("hangs.py");
  cudaagent::testing::write_file(
      hangs, "import time\nprint('{\"version\": \"ast-tokens-1\"}', flush=True)\ntime.sleep(60)\n");
  auto hanging = AstTokenizer::start("python3", hangs, 0.5);  // start-up may take longer
  REQUIRE_MESSAGE(hanging, hanging.status().message());
  auto late = hanging.value().parse("x = 1\n");
  REQUIRE_FALSE(late);
  CHECK(late.status().message().find("did not answer within") != std::string::npos);

  const std::string garbage = dir.file("garbage.py");
  cudaagent::testing::write_file(
      garbage,
      "import sys\nprint('{\"version\": \"ast-tokens-1\"}', flush=True)\n"
      "sys.stdin.buffer.readline()\nprint('[1, 2]', flush=True)\nsys.stdin.read()\n");
  auto lying = AstTokenizer::start("python3", garbage, 5);
  REQUIRE_MESSAGE(lying, lying.status().message());
  auto nonsense = lying.value().parse("x = 1\n");
  REQUIRE_FALSE(nonsense);
  CHECK(nonsense.status().message().find("answered") != std::string::npos);
}

TEST_CASE("parse_sources: several helpers, answers in order, failures per source") {
  auto first = cudaagent::start_ast_tokenizer("");
  REQUIRE_MESSAGE(first, first.status().message());
  const std::string python = first.value().python();
  const std::string script = cudaagent::share_dir() + "/harness/ast_features.py";
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i) {
    texts.push_back(i % 7 == 3 ? "def broken(:\n"
                               : "y = torch.op" + std::to_string(i) + "(x" + std::string(i % 5, '+') +
                                     (i % 5 ? "1" : "") + ")\n");
  }
  const std::vector<std::string_view> sources(texts.begin(), texts.end());
  std::uint64_t restarts = 0;
  auto answers = cudaagent::parse_sources(python, script, sources, 3, restarts);
  REQUIRE(answers.size() == sources.size());
  CHECK(restarts == 0);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    CAPTURE(i);
    REQUIRE(answers[i].has_value());
    REQUIRE(answers[i]->is_ok());
    auto alone = first.value().parse(sources[i]);
    REQUIRE(alone);
    CHECK(answers[i]->value().parsed == alone.value().parsed);
    CHECK(answers[i]->value().tokens == alone.value().tokens);
    CHECK(answers[i]->value().ops == alone.value().ops);
  }

  // A helper that dies on one source: that source is a Status, the others are answered.
  cudaagent::testing::TempDir dir;
  const std::string crashing = dir.file("crashing.py");
  cudaagent::testing::write_file(
      crashing, "import os, sys\nsys.path.insert(0, " + std::string("'") +
                    cudaagent::share_dir() + "/harness')\nsys.dont_write_bytecode = True\n"
                    "import ast_features\nreal = ast_features.answer\n"
                    "def answer(line):\n    if b'CRASH' in line:\n        os._exit(4)\n"
                    "    return real(line)\nast_features.answer = answer\nast_features.main()\n");
  texts[5] = "x = 'CRASH'\n";
  const std::vector<std::string_view> with_crash(texts.begin(), texts.end());
  auto crashed = cudaagent::parse_sources(python, crashing, with_crash, 2, restarts);
  CHECK(restarts == 1);
  REQUIRE(crashed[5].has_value());
  CHECK_FALSE(crashed[5]->is_ok());
  CHECK(crashed[5]->status().message().find("exited with code 4") != std::string::npos);
  for (std::size_t i = 0; i < with_crash.size(); ++i) {
    if (i != 5) CHECK((crashed[i].has_value() && crashed[i]->is_ok()));
  }

  // No helper can start: nothing is answered, and nothing is made up.
  auto none = cudaagent::parse_sources("/nonexistent/python3", script, sources, 2, restarts);
  for (const auto& answer : none) CHECK_FALSE(answer.has_value());
}
