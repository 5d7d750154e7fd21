// Reference sets: directories (recursive, sorted, *.py only), single files and JSONL, set names,
// and what is skipped with a warning rather than failing the run.
#include "cudaagent/dedup/stage.h"

#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "test_support.h"

using cudaagent::read_reference_set;
using cudaagent::ReferenceSet;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;

namespace {

class CapturingLogger : public cudaagent::Logger {
 public:
  CapturingLogger() : Logger("test", nullptr) {}
  std::string text;

 protected:
  void write(std::string_view message) override { text.append(message).push_back('\n'); }
};

struct Fixture {
  CapturingLogger log;
  cudaagent::Clock clock;
  std::atomic<int> stop{0};
  cudaagent::Session session{log, clock, stop};
};

std::vector<std::string> names(const ReferenceSet& set) {
  std::vector<std::string> out;
  for (const auto& task : set.tasks) out.push_back(task.name);
  return out;
}

}  // namespace

TEST_CASE("a reference directory: every .py below it, in path order, named relative to it") {
  Fixture f;
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "bench" / "level2");
  std::filesystem::create_directories(dir.path() / "bench" / "level1");
  write_file(dir.file("bench/level2/b.py"), "y = 2\n");
  write_file(dir.file("bench/level1/a.py"), "x = 1\n");
  write_file(dir.file("bench/level1/z.py"), "z = 3\n");
  write_file(dir.file("bench/level1/notes.txt"), "not a task\n");
  write_file(dir.file("bench/big.py"), std::string(300, '#'));

  auto set = read_reference_set(dir.file("bench") + "/", 100, f.session);
  REQUIRE_MESSAGE(set, set.status().message());
  CHECK(set.value().name == "bench");
  CHECK(names(set.value()) ==
        std::vector<std::string>{"level1/a.py", "level1/z.py", "level2/b.py"});
  CHECK(set.value().tasks[0].source == "x = 1\n");
  CHECK(f.log.text.find("big.py") != std::string::npos);  // skipped, and said so

  auto named = read_reference_set("kb=" + dir.file("bench"), 1000, f.session);
  REQUIRE(named);
  CHECK(named.value().name == "kb");
  CHECK(named.value().tasks.size() == 4);
}

TEST_CASE("a reference .py file and a reference JSONL file") {
  Fixture f;
  TempDir dir;
  write_file(dir.file("one.py"), "x = 1\n");
  auto single = read_reference_set(dir.file("one.py"), 1000, f.session);
  REQUIRE(single);
  CHECK(single.value().name == "one.py");
  CHECK(names(single.value()) == std::vector<std::string>{"one.py"});

  write_file(dir.file("tasks.jsonl"),
             "{\"id\":\"t1\",\"task\":{\"model_py\":\"a = 1\\n\"}}\n"
             "\n"
             "{\"task\":{\"model_py\":\"b = 2\\n\"}}\n"
             "{\"id\":\"t3\",\"task\":{\"model_py\":3}}\n"
             "not json\n");
  auto jsonl = read_reference_set("mine=" + dir.file("tasks.jsonl"), 1000, f.session);
  REQUIRE(jsonl);
  CHECK(jsonl.value().name == "mine");
  CHECK(names(jsonl.value()) == std::vector<std::string>{"t1", "line 3"});
  CHECK(jsonl.value().tasks[1].source == "b = 2\n");
  CHECK(f.log.text.find("line 4: no task.model_py string") != std::string::npos);
  CHECK(f.log.text.find("line 5: invalid JSON") != std::string::npos);
}

TEST_CASE("a reference path that does not exist is a Status") {
  Fixture f;
  auto missing = read_reference_set("kb=/nonexistent/dir", 1000, f.session);
  REQUIRE_FALSE(missing);
  CHECK(missing.status().message().find("/nonexistent/dir") != std::string::npos);
  CHECK_FALSE(read_reference_set("kb=", 1000, f.session));
  // A name with a slash is part of the path, not a set name.
  auto path = read_reference_set("./a=b", 1000, f.session);
  REQUIRE_FALSE(path);
  CHECK(path.status().message().find("'./a=b'") != std::string::npos);
}
