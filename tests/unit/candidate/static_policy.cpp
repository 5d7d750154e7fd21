// The static policies as verify and profile share them (issue 9): the order of the two parts'
// verdicts, the first step on snapshots (the source policy, a missing model_new.py, model_new.py's
// own policy on the real python3, its switch and its failures), the second on objects compiled
// here with g++, and the key a stored result takes from the policy.
#include "cudaagent/candidate/static_policy.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "cudaagent/base/sha256.h"
#include "test_support.h"

using cudaagent::BuildResult;
using cudaagent::CompileStep;
using cudaagent::PolicyFinding;
using cudaagent::PolicyVerdict;
using cudaagent::StaticPolicy;
using cudaagent::Verdict;
using cudaagent::testing::read_file;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;

namespace {

const std::string kSource = CUDAAGENT_SOURCE_DIR;

std::string python3() { return cudaagent::testing::python3_on_path(); }

StaticPolicy policy(bool python_policy = true) {
  auto loaded = cudaagent::load_static_policy(python_policy, python3(), kSource + "/share");
  REQUIRE_MESSAGE(loaded, loaded.status().message());
  return loaded.value();
}

cudaagent::SourcePolicyOutcome check(const std::map<std::string, std::string>& files,
                                     const StaticPolicy& with = policy()) {
  auto snapshot = cudaagent::snapshot_from_files(files, {}, {});
  REQUIRE(snapshot);
  return cudaagent::check_source_policies(snapshot.value(), with);
}

bool timed(const std::vector<std::pair<std::string, double>>& timings, const std::string& name) {
  return std::any_of(timings.begin(), timings.end(), [&](const auto& t) { return t.first == name; });
}

const char kHonestModel[] = R"(import torch
import torch.nn as nn
import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.relu(x)
)";
const char kTorchKernel[] = "torch::Tensor f(torch::Tensor x) { return torch::matmul(x, x); }\n";

}  // namespace

TEST_CASE("static verdicts: tampering of either part first, then the source's, then model_new.py's") {
  const PolicyVerdict source_reject{Verdict::kRejectPolicy, "forbidden-file: kernels/x.so"};
  const PolicyVerdict python_hack{Verdict::kFlagHack, "python-frames: model_new.py:9: f_back"};
  const PolicyVerdict python_reject{Verdict::kRejectPolicy, "python-import: model_new.py:1: os"};
  const PolicyVerdict python_compile{Verdict::kFailCompile, "model_new.py does not compile: SyntaxError"};
  CHECK_FALSE(cudaagent::decide_static_policy(std::nullopt, std::nullopt));
  CHECK(cudaagent::decide_static_policy(source_reject, python_hack)->reason == python_hack.reason);
  CHECK(cudaagent::decide_static_policy(source_reject, python_reject)->reason == source_reject.reason);
  CHECK(cudaagent::decide_static_policy(source_reject, python_compile)->verdict == Verdict::kRejectPolicy);
  CHECK(cudaagent::decide_static_policy(std::nullopt, python_compile)->verdict == Verdict::kFailCompile);
  const PolicyVerdict source_hack{Verdict::kFlagHack, "a"};
  CHECK(cudaagent::decide_static_policy(source_hack, python_hack)->reason == "a");
}

TEST_CASE("an honest candidate passes the first step, model_new.py's policy timed") {
  const auto outcome = check({{"model_new.py", kHonestModel}});
  CHECK_FALSE(outcome.stops());
  CHECK_FALSE(outcome.verdict());
  CHECK(outcome.findings.empty());
  CHECK(timed(outcome.timings, "python_policy"));
}

TEST_CASE("torch compute in the sources is REJECT_POLICY; model_new.py's tampering still wins") {
  auto outcome = check({{"model_new.py", kHonestModel}, {"kernels/a.cpp", kTorchKernel}});
  REQUIRE(outcome.verdict());
  CHECK(outcome.verdict()->verdict == Verdict::kRejectPolicy);
  CHECK(outcome.verdict()->reason.rfind("torch-compute-in-source: kernels/a.cpp:1: torch::matmul", 0) == 0);

  outcome = check({{"model_new.py", std::string("import sys\n") + kHonestModel}, {"kernels/a.cpp", kTorchKernel}});
  REQUIRE(outcome.verdict());
  CHECK(outcome.verdict()->verdict == Verdict::kFlagHack);
  CHECK(outcome.verdict()->reason.rfind("python-", 0) == 0);
  REQUIRE(outcome.findings.size() >= 2);  // the source's first, then model_new.py's
  CHECK(outcome.findings.front().rule == "torch-compute-in-source");
  CHECK(outcome.findings.back().path == "model_new.py:1");
}

TEST_CASE("the source scans as one list: torch compute, line directives, macros before torch's headers") {
  const std::map<std::string, std::string> files = {
      {"kernels/a.cpp", kTorchKernel},
      {"kernels/b.cpp", "#include <torch/extension.h>\n#line 7 \"other.h\"\nint b() { return 1; }\n"},
      {"kernels/c.cu", "#define Py_DECREF(o)\n#include <torch/extension.h>\n"},
      {"kernels/d.cpp", "#include <torch/extension.h>\ntorch::Tensor d(torch::Tensor x) { return x; }\n"}};
  const std::vector<PolicyFinding> found = cudaagent::scan_candidate_sources(files);
  REQUIRE(found.size() == 3);
  CHECK(found[0].rule == "torch-compute-in-source");
  CHECK(found[0].path == "kernels/a.cpp:1");
  CHECK(found[1].rule == "line-directive");
  CHECK(found[1].path == "kernels/b.cpp:2");
  CHECK(found[2].rule == "macro-before-header");
  CHECK(found[2].path == "kernels/c.cu:2");  // the include the macro comes before
  // The first step reports the same findings, in the same order, the first giving the reason.
  std::map<std::string, std::string> with_model = files;
  with_model["model_new.py"] = kHonestModel;
  const auto outcome = check(with_model);
  REQUIRE(outcome.findings.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(outcome.findings[i].detail == found[i].detail);
  CHECK(cudaagent::scan_candidate_sources({{"kernels/d.cpp", files.at("kernels/d.cpp")}}).empty());
}

TEST_CASE("no model_new.py is REJECT_POLICY, and there is nothing for its policy to read") {
  const auto outcome = check({{"kernels/a.cpp", "int a;\n"}});
  REQUIRE(outcome.verdict());
  CHECK(outcome.verdict()->reason == "missing-file: model_new.py: the candidate has no model_new.py");
  CHECK_FALSE(timed(outcome.timings, "python_policy"));
}

TEST_CASE("the Python policy's switch: off, a forbidden import reaches the layers beneath") {
  const std::map<std::string, std::string> files{{"model_new.py", std::string("import time\n") + kHonestModel}};
  auto on = check(files);
  REQUIRE(on.verdict());
  CHECK(on.verdict()->verdict == Verdict::kRejectPolicy);
  CHECK(on.verdict()->reason.rfind("python-import: model_new.py:1: ", 0) == 0);
  auto off = check(files, policy(false));
  CHECK_FALSE(off.stops());
  CHECK(off.findings.empty());
  CHECK_FALSE(timed(off.timings, "python_policy"));
}

TEST_CASE("a policy helper that cannot run is the machinery's failure, not a verdict") {
  StaticPolicy broken = policy();
  broken.python = "/nonexistent/python3";
  const auto outcome = check({{"model_new.py", kHonestModel}}, broken);
  REQUIRE(outcome.infra);
  CHECK(outcome.infra->rfind("python policy: ", 0) == 0);
  CHECK(outcome.stops());
  CHECK_FALSE(outcome.verdict());
}

TEST_CASE("the key a stored result takes: the script's hash, or off") {
  const StaticPolicy on = policy();
  CHECK(on.key() == cudaagent::sha256_hex(read_file(kSource + "/share/harness/model_policy.py")));
  CHECK(on.object_policy_json == kSource + "/share/harness/policy.json");
  CHECK(policy(false).key() == "off");
  TempDir empty;
  CHECK_FALSE(cudaagent::load_static_policy(true, python3(), empty.path().string()));
  // Off, the script is not needed at all.
  CHECK(cudaagent::load_static_policy(false, python3(), empty.path().string()));
}

namespace {

constexpr const char* kDlsymSource = "#include <dlfcn.h>\nvoid* find(const char* name) { return dlsym(nullptr, name); }\n";

// `code` compiled by g++ into DIR/a.o, as the build's one step for kernels/a.cpp.
BuildResult compiled(const TempDir& dir, const std::string& code) {
  const std::string source = dir.file("a.cpp"), object = dir.file("a.o");
  write_file(source, code);
  const std::string command = "g++ -std=c++17 -O2 -fPIC -w -c " + source + " -o " + object;
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  BuildResult build;
  build.ok = true;
  CompileStep step;
  step.source = "kernels/a.cpp";
  step.object = object;
  step.ok = true;
  build.steps.push_back(step);
  return build;
}

}  // namespace

TEST_CASE("the object step: findings and their verdict, a runner that fails is infra") {
  TempDir dir;
  const BuildResult build = compiled(dir, kDlsymSource);

  const auto outcome = cudaagent::check_object_policy(build, policy(), {});
  CHECK_FALSE(outcome.infra);
  CHECK(timed(outcome.timings, "objects"));
  const auto verdict = cudaagent::object_policy_verdict(outcome.findings);
  REQUIRE(verdict);
  CHECK(verdict->verdict == Verdict::kFlagHack);
  CHECK(verdict->reason.rfind("dynamic-lookup: kernels/a.cpp", 0) == 0);

  const auto failing = cudaagent::check_object_policy(
      build, policy(), [](const cudaagent::ProcessSpec&) -> cudaagent::Result<cudaagent::ProcessResult> {
        return cudaagent::Status::error("no sandbox");
      });
  REQUIRE(failing.infra);
  CHECK(failing.infra->rfind("object check: ", 0) == 0);
  CHECK(failing.findings.empty());
}

TEST_CASE("with a build cache, the object tools' output is kept and read again for the same bytes") {
  TempDir dir;
  BuildResult build = compiled(dir, kDlsymSource);
  build.cache_dir = dir.file("cache");
  const auto first = cudaagent::check_object_policy(build, policy(), {});
  REQUIRE_FALSE(first.infra);
  REQUIRE(cudaagent::object_policy_verdict(first.findings));

  // The tools cannot run now, yet the same bytes are judged the same from what was kept.
  const auto no_tools = [](const cudaagent::ProcessSpec&) -> cudaagent::Result<cudaagent::ProcessResult> {
    return cudaagent::Status::error("no sandbox");
  };
  const auto again = cudaagent::check_object_policy(build, policy(), no_tools);
  CHECK_FALSE(again.infra);
  const auto verdict = cudaagent::object_policy_verdict(again.findings);
  REQUIRE(verdict);
  CHECK(verdict->reason.rfind("dynamic-lookup: kernels/a.cpp", 0) == 0);

  // Other bytes are other keys: the tools must run for them.
  (void)compiled(dir, "int plain(int x) { return x + 1; }\n");  // the same path, other bytes
  CHECK(cudaagent::check_object_policy(build, policy(), no_tools).infra);
}

TEST_CASE("object findings: none is no verdict; tampering outranks forbidden use in the reason") {
  CHECK_FALSE(cudaagent::object_policy_verdict({}));
  const std::vector<PolicyFinding> findings{
      {"torch-compute", "kernels/a.cpp", "at::native::relu", Verdict::kRejectPolicy},
      {"dynamic-lookup", "kernels/a.cpp", "dlsym", Verdict::kFlagHack}};
  const auto verdict = cudaagent::object_policy_verdict(findings);
  REQUIRE(verdict);
  CHECK(verdict->verdict == Verdict::kFlagHack);
  CHECK(verdict->reason == "dynamic-lookup: kernels/a.cpp: dlsym");
}
