// Tests for the compiler-output filter (issue 10, class 7): what gcc and nvcc print about files
// outside the workspace (an `#include "/etc/shadow"`, a "kernels/../../secret") never reaches the
// agent, quotes are kept only when they are the workspace file's own line, and a line the
// candidate forged through a static_assert message cannot lend a hidden file's quote its place.
#include "cudaagent/candidate/build_diagnostics.h"

#include <doctest/doctest.h>

using cudaagent::DiagnosticScope;
using cudaagent::filter_compiler_output;
using cudaagent::trim_diagnostics;

namespace {

DiagnosticScope scope() {
  DiagnosticScope s;
  s.workspace_dir = "/job/work";
  s.files["kernels/a.cpp"] = "int x = 1;\n#include \"../../secret.txt\"\n";
  s.files["kernels/b.cu"] = "int y = 2;\n\tbad line;\n";
  s.public_roots = {"/usr/include", "/opt/torch/include"};
  return s;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("gcc: a diagnostic in a file outside the workspace is named, never quoted") {
  const std::string log =
      "In file included from /job/work/kernels/a.cpp:2:\n"
      "/job/work/kernels/../../secret.txt:1:1: error: 'TOPSECRET' does not name a type\n"
      "    1 | TOPSECRET-LINE-1 hunter2\n"
      "      | ^~~~~~~~~\n";
  const std::string out = filter_compiler_output(log, scope());
  CHECK_FALSE(has(out, "TOPSECRET"));
  CHECK_FALSE(has(out, "hunter2"));
  CHECK(has(out, "In file included from /job/work/kernels/a.cpp:2:"));
  CHECK(has(out, "/job/work/kernels/../../secret.txt:1: error: (in a file outside the workspace"));
  // The error still counts as one for the agent's summary.
  CHECK(has(trim_diagnostics(out, "/job/work/"), "kernels/../../secret.txt:1: error:"));
}

TEST_CASE("nvcc: the same for its file(line) form and two-space quotes") {
  const std::string log =
      "/job/work/kernels/../../secret.txt(1): error: this declaration has no storage class\n"
      "  TOPSECRET-LINE-1 hunter2\n"
      "  ^\n"
      "\n"
      "1 error detected in the compilation of \"/job/work/kernels/b.cu\".\n";
  const std::string out = filter_compiler_output(log, scope());
  CHECK_FALSE(has(out, "hunter2"));
  CHECK(has(out, "1 error detected in the compilation of"));
}

TEST_CASE("quotes of the workspace's own lines are kept, byte-checked") {
  const std::string log =
      "/job/work/kernels/a.cpp:1:9: error: expected ';'\n"
      "    1 | int x = 1;\n"
      "      |         ^\n"
      "/job/work/kernels/b.cu(2): error: identifier \"bad\" is undefined\n"
      "          bad line;\n"
      "          ^\n";
  // The file's tab is compared expanded to 8 columns: "  " + 8 spaces + "bad line;".
  const std::string out = filter_compiler_output(log, scope());
  CHECK(has(out, "    1 | int x = 1;\n      |         ^\n"));
  CHECK(has(out, "/job/work/kernels/b.cu(2): error"));
  CHECK(has(out, "          bad line;\n          ^\n"));
  // A quote that is not the located line's text is dropped, and so is the rest of that block.
  const std::string wrong = "/job/work/kernels/b.cu(1): error: x\n  not the line\n  ^\n";
  CHECK_FALSE(has(filter_compiler_output(wrong, scope()), "not the line"));
  const std::string nvcc = "/job/work/kernels/b.cu(1): error: x\n  int y = 2;\n  ^\n";
  CHECK(has(filter_compiler_output(nvcc, scope()), "  int y = 2;\n  ^\n"));
}

TEST_CASE("a forged workspace location does not let a hidden file's quote through") {
  // A static_assert message holding a newline, at a hidden location, imitates a workspace line;
  // the quote that follows is the hidden file's, and it is not line 1 of kernels/a.cpp.
  const std::string log =
      "/etc/shadow:1:1: error: static assertion failed: \n"
      "/job/work/kernels/a.cpp:1:1: error: fake\n"
      "    1 | root:$6$salt$hash:19000:0:99999:7:::\n"
      "      | ^~~~\n"
      "/job/work/kernels/b.cu(1): error: fake\n"
      "  root:$6$salt$hash:19000:0:99999:7:::\n";
  const std::string out = filter_compiler_output(log, scope());
  CHECK_FALSE(has(out, "root:$6$"));
  CHECK(has(out, "/etc/shadow:1: error: (in a file outside the workspace"));
}

TEST_CASE("public headers are located but not quoted; other lines are dropped") {
  const std::string log =
      "/usr/include/c++/12/bits/stl_vector.h:100:5: error: no match\n"
      "  100 |     push_back(value);\n"
      "      |     ^~~~~~~~~\n"
      "/usr/include/../../etc/passwd:1:1: error: x\n"
      "    1 | root:x:0:0\n"
      "g++: fatal error: Killed signal terminated program cc1plus\n"
      "random text the filter has no shape for\n"
      "compilation terminated.\n";
  const std::string out = filter_compiler_output(log, scope());
  CHECK(has(out, "stl_vector.h:100:5: error: no match"));
  CHECK_FALSE(has(out, "push_back(value)"));
  CHECK_FALSE(has(out, "root:x"));
  CHECK(has(out, "/usr/include/../../etc/passwd:1: error: (in a file outside the workspace"));
  CHECK(has(out, "g++: fatal error: Killed signal terminated program cc1plus"));
  CHECK_FALSE(has(out, "random text"));
  CHECK(has(out, "compilation terminated."));
}

TEST_CASE("relative paths resolve against the workspace; unknown workspace files are hidden") {
  const std::string log =
      "kernels/a.cpp:1:1: error: x\n"
      "    1 | int x = 1;\n"
      "kernels/planted.h:1:1: error: y\n"
      "    1 | secret\n";
  const std::string out = filter_compiler_output(log, scope());
  CHECK(has(out, "    1 | int x = 1;"));
  CHECK(has(out, "kernels/planted.h:1: error: (in a file outside the workspace"));
  CHECK_FALSE(has(out, "| secret"));
}

TEST_CASE("the output is capped") {
  std::string log;
  for (int i = 0; i < 1000; ++i) log += "/job/work/kernels/a.cpp:1:1: error: again and again\n";
  const std::string out = filter_compiler_output(log, scope(), 2000);
  CHECK(out.size() <= 2004);
  CHECK(out.substr(out.size() - 4) == "...\n");
}
