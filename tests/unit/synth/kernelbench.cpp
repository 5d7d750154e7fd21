// KernelBench's folders as task records: levels and problems in numeric order, other files left
// out, a level folder alone, and the record's meta.
#include "cudaagent/synth/kernelbench.h"

#include <doctest/doctest.h>

#include <filesystem>

#include "test_support.h"

namespace cudaagent::synth {
namespace {

TEST_CASE("list_kernelbench orders problems by level and number and skips other files") {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.file("level1"));
  std::filesystem::create_directories(dir.file("level10"));
  std::filesystem::create_directories(dir.file("level2"));
  std::filesystem::create_directories(dir.file("notes"));
  for (const char* file : {"level1/10_Conv.py", "level1/9_ReLU.py", "level1/README.md", "level1/x_y.py",
                           "level2/1_Fused.py", "level10/3_Big.py", "notes/1_Not.py"}) {
    testing::write_file(dir.file(file), std::string("# ") + file + "\n");
  }
  auto problems = list_kernelbench(dir.path().string());
  REQUIRE_MESSAGE(problems, problems.status().message());
  std::vector<std::string> files;
  for (const auto& p : problems.value()) files.push_back(p.file);
  CHECK(files == std::vector<std::string>{"level1/9_ReLU.py", "level1/10_Conv.py", "level2/1_Fused.py",
                                          "level10/3_Big.py"});
  CHECK(problems.value()[1].problem_id == 10);
  CHECK(problems.value()[1].name == "10_Conv");

  auto one = list_kernelbench(dir.file("level2"));
  REQUIRE(one);
  REQUIRE(one.value().size() == 1);
  CHECK(one.value()[0].level == 2);
  CHECK_FALSE(list_kernelbench(dir.file("notes")));
  CHECK_FALSE(list_kernelbench(dir.file("missing")));
}

TEST_CASE("a KernelBench task record carries the source, its hash as id, and level/problem_id/name") {
  const KernelBenchProblem problem{1, 19, "19_ReLU", "level1/19_ReLU.py", "/x/level1/19_ReLU.py"};
  const std::string line = kernelbench_task_record(problem, "import torch\n");
  REQUIRE(line.back() == '\n');
  simdjson::dom::parser parser;
  simdjson::dom::element record = parser.parse(line);
  CHECK(std::string_view(record["id"]) == "b91a3bc5e2064d025a8ae122555c96948ec5b4895d53d809c4b66b71a4915133");
  CHECK(std::string_view(record["task"]["source"]) == "kernelbench");
  CHECK(std::string_view(record["task"]["model_py"]) == "import torch\n");
  CHECK(int64_t(record["task"]["meta"]["level"]) == 1);
  CHECK(int64_t(record["task"]["meta"]["problem_id"]) == 19);
  CHECK(std::string_view(record["task"]["meta"]["name"]) == "19_ReLU");
}

}  // namespace
}  // namespace cudaagent::synth
