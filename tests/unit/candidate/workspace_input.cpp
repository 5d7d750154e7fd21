// The input-mode rule and how a workspace argument becomes an input.
#include "cudaagent/candidate/workspace_input.h"

#include <doctest/doctest.h>

#include <filesystem>

#include "test_support.h"

using namespace cudaagent;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;


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
