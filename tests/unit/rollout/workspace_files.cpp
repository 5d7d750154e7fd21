// The file tools on a real folder: paths confined to the workspace (absolute, "..", links in and
// out, FIFOs), protected files by name and inode, Write only after Read, Edit and MultiEdit
// semantics, Glob patterns, Grep modes — every misuse an error result, never a crash or a hang.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "cudaagent/rollout/workspace_files.h"
#include "test_support.h"

using cudaagent::rollout::EditSpec;
using cudaagent::rollout::GrepArgs;
using cudaagent::rollout::ToolResult;
using cudaagent::rollout::WorkspaceFiles;
using cudaagent::testing::read_file;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;
namespace fs = std::filesystem;

namespace {

struct Fixture {
  TempDir dir;
  std::string ws;
  Fixture() {
    ws = dir.file("ws");
    fs::create_directories(ws + "/kernels");
    fs::create_directories(ws + "/utils");
    write_file(ws + "/model.py", "class Model:\n    pass\n");
    write_file(ws + "/utils/compile.sh", "echo\n");
    write_file(ws + "/kernels/a.cu", "__global__ void a() {}\n// TODO fuse\n");
    write_file(ws + "/kernels/b.cpp", "int b() { return 1; }\n");
    write_file(dir.file("secret"), "outside\n");
  }
  WorkspaceFiles open() {
    auto files = WorkspaceFiles::open(ws, "/workspace", {"model.py", "binding.cpp", "utils/", "SKILL.md"});
    REQUIRE(files);
    return std::move(files).value();
  }
};

bool has(const ToolResult& r, const std::string& text) { return r.text.find(text) != std::string::npos; }

}  // namespace

TEST_CASE("paths resolve beneath the workspace, whichever way the model names them") {
  Fixture f;
  WorkspaceFiles files = f.open();
  CHECK(files.relative_path("kernels/a.cu").value() == "kernels/a.cu");
  CHECK(files.relative_path("./kernels//a.cu").value() == "kernels/a.cu");
  CHECK(files.relative_path("/workspace/kernels/a.cu").value() == "kernels/a.cu");  // the model's view
  CHECK(files.relative_path(f.ws + "/model.py").value() == "model.py");             // the host path
  CHECK(files.relative_path("kernels/../model.py").value() == "model.py");
  CHECK(files.relative_path("/workspace").value() == ".");
  CHECK_FALSE(files.relative_path("../secret"));
  CHECK_FALSE(files.relative_path("kernels/../../secret"));
  CHECK_FALSE(files.relative_path("/etc/passwd"));
  CHECK_FALSE(files.relative_path("/workspace2/x"));
  CHECK_FALSE(files.relative_path(""));
  CHECK_FALSE(files.relative_path(std::string("a\0b", 3)));
  CHECK(files.relative_path("/etc/passwd").status().message().find("outside the workspace") !=
        std::string::npos);
}

TEST_CASE("Read numbers lines, pages with offset and limit, and refuses what it must not open") {
  Fixture f;
  std::string many;
  for (int i = 1; i <= 30; ++i) many += "line " + std::to_string(i) + "\n";
  write_file(f.ws + "/many.txt", many);
  write_file(f.ws + "/long.txt", std::string(5000, 'x') + "\n");
  write_file(f.ws + "/empty.txt", "");
  write_file(f.ws + "/bin.dat", std::string("ab\0cd", 5));
  WorkspaceFiles files = f.open();
  const ToolResult all = files.read("model.py", 0, 0);
  CHECK_FALSE(all.error);
  CHECK(all.text == "     1\tclass Model:\n     2\t    pass\n");
  const ToolResult page = files.read("many.txt", 10, 3);
  CHECK(page.text.rfind("    10\tline 10\n    11\tline 11\n    12\tline 12\n", 0) == 0);
  CHECK(has(page, "read on with offset=13"));
  CHECK(has(files.read("long.txt", 0, 0), "longer than 2000 characters were cut"));
  CHECK(has(files.read("empty.txt", 0, 0), "is empty"));
  CHECK(has(files.read("bin.dat", 0, 0), "binary file"));
  CHECK(files.read("many.txt", 99, 0).error);
  CHECK(has(files.read("missing.py", 0, 0), "does not exist"));
  CHECK(has(files.read("kernels", 0, 0), "is a folder"));
  CHECK(files.read("../secret", 0, 0).error);

  // Links are never followed: not to a file outside, not to a file inside, not through a folder.
  fs::create_symlink(f.dir.file("secret"), f.ws + "/out_link");
  fs::create_symlink("model.py", f.ws + "/in_link");
  fs::create_directory_symlink(f.dir.path(), f.ws + "/dir_link");
  CHECK(has(files.read("out_link", 0, 0), "symbolic link"));
  CHECK(has(files.read("in_link", 0, 0), "symbolic link"));
  CHECK(has(files.read("dir_link/secret", 0, 0), "symbolic link"));
  // A FIFO does not block the reader.
  REQUIRE(::mkfifo((f.ws + "/pipe").c_str(), 0600) == 0);
  CHECK(has(files.read("pipe", 0, 0), "not a regular file"));
}

TEST_CASE("Write creates files and folders, replaces only what was read, and never a protected file") {
  Fixture f;
  WorkspaceFiles files = f.open();
  CHECK_FALSE(files.write("kernels/new/c.cu", "x\n").error);
  CHECK(read_file(f.ws + "/kernels/new/c.cu") == "x\n");
  CHECK_FALSE(files.write("kernels/new/c.cu", "y\n").error);  // our own write counts as seen
  CHECK(has(files.write("kernels/a.cu", "z"), "has not been read"));
  CHECK_FALSE(files.read("kernels/a.cu", 0, 0).error);
  write_file(f.ws + "/kernels/a.cu", "changed behind the model's back, longer\n");
  CHECK(has(files.write("kernels/a.cu", "z"), "changed since it was last read"));
  CHECK_FALSE(files.read("kernels/a.cu", 0, 0).error);
  CHECK_FALSE(files.write("/workspace/kernels/a.cu", "z").error);
  CHECK(read_file(f.ws + "/kernels/a.cu") == "z");

  for (const char* path : {"model.py", "/workspace/model.py", "utils/compile.sh", "utils/new.py", "utils",
                           "kernels/../model.py", "SKILL.md"}) {
    CAPTURE(path);
    CHECK(has(files.write(path, "pwned"), "protected"));
  }
  CHECK(read_file(f.ws + "/model.py") == "class Model:\n    pass\n");
  CHECK(has(files.write("../escape.txt", "x"), "outside the workspace"));
  CHECK_FALSE(fs::exists(f.dir.file("escape.txt")));
  // A link planted by a command: writing through it, or into a linked folder, is refused.
  fs::create_symlink(f.dir.file("secret"), f.ws + "/planted");
  fs::create_directory_symlink(f.dir.path(), f.ws + "/planted_dir");
  CHECK(has(files.write("planted", "x"), "symbolic link"));
  CHECK(has(files.write("planted_dir/secret", "x"), "symbolic link"));
  CHECK(has(files.write("planted_dir/fresh", "x"), "symbolic link"));
  CHECK(read_file(f.dir.file("secret")) == "outside\n");
  CHECK_FALSE(fs::exists(f.dir.file("fresh")));
  // A hard link to a protected file under another name is still the protected file.
  REQUIRE(::link((f.ws + "/model.py").c_str(), (f.ws + "/alias.py").c_str()) == 0);
  CHECK_FALSE(files.read("alias.py", 0, 0).error);
  CHECK(has(files.write("alias.py", "pwned"), "protected"));
  CHECK(read_file(f.ws + "/model.py") == "class Model:\n    pass\n");
}

TEST_CASE("Edit replaces one exact occurrence, or all with replace_all; MultiEdit is all or nothing") {
  Fixture f;
  write_file(f.ws + "/k.cu", "int x = 1;\nint y = 1;\nint z = 2;\n");
  WorkspaceFiles files = f.open();
  CHECK(has(files.edit("k.cu", {"int z", "long z", false}), "has not been read"));
  REQUIRE_FALSE(files.read("k.cu", 0, 0).error);
  CHECK(has(files.edit("k.cu", {"= 1;", "= 3;", false}), "occurs 2 times"));
  CHECK(has(files.edit("k.cu", {"int w", "x", false}), "was not found"));
  CHECK(has(files.edit("k.cu", {"same", "same", false}), "the same"));
  CHECK(has(files.edit("k.cu", {"", "x", false}), "old_string is empty"));
  CHECK_FALSE(files.edit("k.cu", {"int z = 2;", "long z = 2;", false}).error);
  const ToolResult all = files.edit("k.cu", {"= 1;", "= 3;", true});
  CHECK_FALSE(all.error);
  CHECK(has(all, "2 replacements"));
  CHECK(read_file(f.ws + "/k.cu") == "int x = 3;\nint y = 3;\nlong z = 2;\n");
  CHECK_FALSE(files.edit("fresh.cu", {"", "new file\n", false}).error);  // empty old_string creates
  CHECK(read_file(f.ws + "/fresh.cu") == "new file\n");
  CHECK(has(files.edit("model.py", {"pass", "return 1", false}), "protected"));

  const std::vector<EditSpec> good = {{"int x", "int a", false}, {"int a = 3", "int a = 4", false}};
  CHECK_FALSE(files.multi_edit("k.cu", good).error);
  CHECK(read_file(f.ws + "/k.cu") == "int a = 4;\nint y = 3;\nlong z = 2;\n");
  const std::vector<EditSpec> bad = {{"int y", "int b", false}, {"no such text", "x", false}};
  const ToolResult failed = files.multi_edit("k.cu", bad);
  CHECK(failed.error);
  CHECK(has(failed, "edit 2 of 2"));
  CHECK(read_file(f.ws + "/k.cu") == "int a = 4;\nint y = 3;\nlong z = 2;\n");  // untouched
  CHECK(files.multi_edit("k.cu", {}).error);
}

TEST_CASE("Glob matches within and across folders, never through links") {
  Fixture f;
  fs::create_directories(f.ws + "/deep/er");
  write_file(f.ws + "/deep/er/c.cu", "");
  fs::create_directory_symlink(f.dir.path(), f.ws + "/kernels/linked");
  WorkspaceFiles files = f.open();
  CHECK(files.glob("kernels/*.cu", "").text == "kernels/a.cu\n");
  CHECK(files.glob("**/*.cu", "").text == "deep/er/c.cu\nkernels/a.cu\n");
  CHECK(files.glob("*.{cu,cpp}", "kernels").text == "kernels/a.cu\nkernels/b.cpp\n");
  CHECK(files.glob("**/secret", "").text.find("No files match") == 0);
  CHECK(files.glob("../*", "").error);
  CHECK(files.glob("*", "../").error);
}

TEST_CASE("Grep lists files, shows file:line:text with context, counts, and reports bad patterns") {
  Fixture f;
  write_file(f.ws + "/kernels/c.cu", "one\nTODO two\nthree\nfour\nfive\nTODO six\n");
  WorkspaceFiles files = f.open();
  GrepArgs args;
  args.pattern = "TODO";
  CHECK(files.grep(args).text == "kernels/a.cu\nkernels/c.cu\n");
  args.output_mode = "content";
  args.glob = "c.*";
  CHECK(files.grep(args).text == "kernels/c.cu:2:TODO two\nkernels/c.cu:6:TODO six\n");
  args.context = 1;  // line 4 is in neither context: a separator
  CHECK(files.grep(args).text ==
        "kernels/c.cu-1-one\nkernels/c.cu:2:TODO two\nkernels/c.cu-3-three\n--\n"
        "kernels/c.cu-5-five\nkernels/c.cu:6:TODO six\n");
  args.context = 2;  // contiguous: none
  CHECK(files.grep(args).text.find("--") == std::string::npos);
  args.context = 0;
  args.output_mode = "count";
  CHECK(files.grep(args).text == "kernels/c.cu:2\n");
  args.output_mode = "content";
  args.glob.clear();
  args.pattern = "todo";
  args.case_insensitive = true;
  args.head_limit = 1;
  CHECK(files.grep(args).text.rfind("kernels/a.cu:2:// TODO fuse\n[output limited", 0) == 0);
  args.path = "kernels/c.cu";  // a single file
  args.head_limit.reset();
  CHECK(files.grep(args).text == "kernels/c.cu:2:TODO two\nkernels/c.cu:6:TODO six\n");
  args.pattern = "(";
  CHECK(has(files.grep(args), "not a valid regular expression"));
  args.pattern = "x";
  args.output_mode = "everything";
  CHECK(files.grep(args).error);
  args.output_mode = "content";
  args.path = "../";
  CHECK(files.grep(args).error);
  // A pattern that backtracks forever fails its lines, not the episode.
  write_file(f.ws + "/slow.txt", std::string(40, 'a') + "!\n");
  args.path.clear();
  args.pattern = "(a+)+$";
  args.glob = "slow.txt";
  CHECK(has(files.grep(args), "too expensive"));
}
