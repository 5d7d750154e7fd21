// The candidate record shape shared by verify and profile, and the input-mode rule.
#include "cudaagent/candidate_record.h"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include "test_support.h"

using namespace cudaagent;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;

namespace {

Result<CandidateSource> parse(simdjson::dom::parser& parser, const char* json) {
  simdjson::dom::object object;
  REQUIRE(!parser.parse(json, std::strlen(json)).get(object));
  return read_candidate_record(object);
}

}  // namespace

TEST_CASE("a candidate record gives its task and its files or its workspace") {
  simdjson::dom::parser parser;
  auto files = parse(parser, R"({"task":{"model_py":"M"},"candidate":{"files":{"model_new.py":"N","kernels/a.cu":"K"}}})");
  REQUIRE(files);
  CHECK(files.value().model_py == "M");
  CHECK(files.value().workspace_dir.empty());
  CHECK(files.value().files.size() == 2);
  CHECK(files.value().files.at("kernels/a.cu") == "K");

  auto workspace = parse(parser, R"({"task":{"model_py":"M"},"candidate":{"workspace":"/w"}})");
  REQUIRE(workspace);
  CHECK(workspace.value().workspace_dir == "/w");
  CHECK(workspace.value().files.empty());
}

TEST_CASE("a candidate record of another shape is an error that says what is missing") {
  simdjson::dom::parser parser;
  CHECK(parse(parser, R"({"candidate":{"workspace":"/w"}})").status().message().find("task.model_py") != std::string::npos);
  CHECK(parse(parser, R"({"task":{"model_py":"M"}})").status().message().find("'candidate'") != std::string::npos);
  CHECK(parse(parser, R"({"task":{"model_py":"M"},"candidate":{}})").status().message().find("neither") != std::string::npos);
  CHECK(parse(parser, R"({"task":{"model_py":"M"},"candidate":{"files":{"a":1}}})").status().message() ==
        "candidate.files['a'] is not a string");
}

TEST_CASE("inputs are all workspaces, all JSONL files, or an error") {
  TempDir dir;
  write_file(dir.file("a.jsonl"), "");
  CHECK(inputs_are_workspaces({dir.path().string()}).value() == true);
  CHECK(inputs_are_workspaces({dir.file("a.jsonl")}).value() == false);
  CHECK(inputs_are_workspaces({}).value() == false);
  CHECK(!inputs_are_workspaces({dir.path().string(), dir.file("a.jsonl")}));
}

TEST_CASE("a workspace input takes --task when given, else the workspace's own model.py") {
  TempDir dir;
  const std::string ws = dir.file("ws");
  std::filesystem::create_directory(ws);
  auto given = workspace_input(ws, "task.py", "PRISTINE");
  REQUIRE(given);
  CHECK(given.value().id == "ws");
  CHECK(given.value().workspace_dir == ws);
  CHECK(given.value().model_py == "PRISTINE");
  CHECK(given.value().task_source == "--task task.py");

  auto slash = workspace_input(ws + "/", "task.py", "PRISTINE");  // as a shell completes it
  REQUIRE(slash);
  CHECK(slash.value().id == "ws");
  CHECK(slash.value().workspace_dir == ws);
  CHECK(workspace_path("/") == "/");

  CHECK(workspace_input(ws, "", "").status().message().find("has no model.py") != std::string::npos);
  write_file(ws + "/model.py", "OWN");
  auto own = workspace_input(ws, "", "");
  REQUIRE(own);
  CHECK(own.value().model_py == "OWN");
  CHECK(own.value().task_source.find("not protected") != std::string::npos);
}
