// The candidate record shape shared by verify and profile.
#include "cudaagent/candidate/candidate_record.h"

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
