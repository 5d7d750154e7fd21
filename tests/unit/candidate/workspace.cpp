// Tests for workspace snapshots: an honest CUDA Agent workspace passes untouched, and each attack
// on the workspace (attack catalog cases 45-47) becomes a finding, never a read
// outside the workspace, a hang or a silently used file.
#include "cudaagent/candidate/workspace.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "cudaagent/base/sha256.h"
#include "test_support.h"

using cudaagent::materialize;
using cudaagent::PolicyFinding;
using cudaagent::ProtectedFiles;
using cudaagent::Snapshot;
using cudaagent::snapshot_from_files;
using cudaagent::snapshot_workspace;
using cudaagent::SnapshotLimits;
using cudaagent::testing::read_file;
using cudaagent::testing::TempDir;
using cudaagent::testing::write_file;
namespace fs = std::filesystem;

namespace {

const char kModelPy[] = "import torch\nclass Model(torch.nn.Module):\n    pass\n";
const char kBindingCpp[] = "#include \"binding_registry.h\"\n// pristine\n";
const char kRegistryH[] = "#pragma once\n// pristine registry\n";

ProtectedFiles protected_files() {
  return cudaagent::standard_protected_files(kModelPy, kBindingCpp, kRegistryH);
}

// The layout CUDA Agent hands out, plus what an honest agent writes and its tools leave behind.
void make_honest_workspace(const fs::path& root) {
  fs::create_directories(root / "kernels");
  fs::create_directories(root / "utils");
  fs::create_directories(root / ".git" / "objects");
  fs::create_directories(root / "__pycache__");
  write_file((root / "model.py").string(), kModelPy);
  write_file((root / "binding.cpp").string(), kBindingCpp);
  write_file((root / "binding_registry.h").string(), kRegistryH);
  write_file((root / "SKILL.md").string(), "# skill\n");
  write_file((root / "utils" / "compile.py").string(), "print('compile')\n");
  write_file((root / "utils" / "__init__.py").string(), "");
  write_file((root / ".git" / "HEAD").string(), "ref: refs/heads/main\n");
  write_file((root / "__pycache__" / "model.cpython-311.pyc").string(), "\x00\x01");
  write_file((root / "model_new.py").string(), "import cuda_extension\n");
  write_file((root / "kernels" / "axpby.cu").string(), "__global__ void k() {}\n");
  write_file((root / "kernels" / "axpby_binding.cpp").string(),
             "#include \"../binding_registry.h\"\n");
  write_file((root / "kernels" / "common.cuh").string(), "#pragma once\n");
  write_file((root / "notes.md").string(), "tried tiling\n");
}

Snapshot take(const fs::path& root, const SnapshotLimits& limits = {}) {
  auto result = snapshot_workspace(root.string(), limits, protected_files());
  REQUIRE_MESSAGE(result.is_ok(), result.status().message());
  return std::move(result).value();
}

bool has_finding(const Snapshot& s, const std::string& rule, const std::string& path) {
  return std::any_of(s.findings.begin(), s.findings.end(),
                     [&](const PolicyFinding& f) { return f.rule == rule && f.path == path; });
}

bool has_ignored(const Snapshot& s, const std::string& path) {
  return std::find(s.ignored.begin(), s.ignored.end(), path) != s.ignored.end();
}

std::vector<std::string> names(const Snapshot& s) {
  std::vector<std::string> out;
  for (const auto& entry : s.files) out.push_back(entry.first);
  return out;
}

std::string describe(const Snapshot& s) {
  std::string out;
  for (const auto& f : s.findings) out += f.rule + " " + f.path + ": " + f.detail + "\n";
  return out;
}

}  // namespace

TEST_CASE("an honest workspace gives its candidate files and no findings") {
  TempDir dir;
  make_honest_workspace(dir.path());
  const Snapshot s = take(dir.path());
  CHECK_MESSAGE(s.findings.empty(), describe(s));
  CHECK(names(s) == std::vector<std::string>{"kernels/axpby.cu", "kernels/axpby_binding.cpp",
                                             "kernels/common.cuh", "model_new.py"});
  CHECK(s.files.at("model_new.py") == "import cuda_extension\n");
  // Identical protected copies, protected folders, hidden folders and notes are seen, not used.
  for (const char* ignored : {"model.py", "binding.cpp", "binding_registry.h", "SKILL.md", "utils/",
                              ".git/", "__pycache__/", "notes.md"}) {
    CHECK_MESSAGE(has_ignored(s, ignored), std::string(ignored));
  }
  CHECK(s.content_hash.size() == 64);
}

TEST_CASE("a workspace after CUDA Agent's own compile script is still honest") {
  TempDir dir;
  make_honest_workspace(dir.path());
  fs::create_directories(dir.path() / "build" / "forced_compile");
  write_file(dir.file("build/forced_compile/cuda_extension.so"), "ELF");
  write_file(dir.file("build/forced_compile/build.ninja"), "rule cc\n");
  write_file(dir.file("cuda_extension.so"), "ELF");
  const Snapshot s = take(dir.path());
  CHECK_MESSAGE(s.findings.empty(), describe(s));
  CHECK(has_ignored(s, "build/"));
  CHECK(has_ignored(s, "cuda_extension.so"));
}

TEST_CASE("case 47: a symlink in kernels/ is reported, never followed") {
  TempDir dir;
  make_honest_workspace(dir.path());
  fs::create_symlink("/etc/passwd", dir.path() / "kernels" / "leak.cu");
  fs::create_symlink("/etc/passwd", dir.path() / "kernels" / "leak.txt");
  const Snapshot s = take(dir.path());
  CHECK(has_finding(s, "symlink", "kernels/leak.cu"));
  CHECK(has_finding(s, "symlink", "kernels/leak.txt"));
  CHECK(s.files.count("kernels/leak.cu") == 0);
  for (const auto& [name, bytes] : s.files) CHECK(bytes.find("root:") == std::string::npos);
}

TEST_CASE("a symlinked folder and a symlinked protected file are reported, not walked") {
  TempDir dir, outside;
  make_honest_workspace(dir.path());
  write_file(outside.file("secret.cu"), "secret");
  fs::remove_all(dir.path() / "kernels");
  fs::create_directory_symlink(outside.path(), dir.path() / "kernels");
  fs::remove(dir.path() / "model.py");
  fs::create_symlink(outside.file("secret.cu"), dir.path() / "model.py");
  const Snapshot s = take(dir.path());
  CHECK(has_finding(s, "symlink", "kernels"));
  CHECK(has_finding(s, "symlink", "model.py"));
  CHECK(names(s) == std::vector<std::string>{"model_new.py"});
}

TEST_CASE("the workspace root itself must not be a symlink") {
  TempDir dir;
  make_honest_workspace(dir.path() / "real");
  fs::create_directory_symlink(dir.path() / "real", dir.path() / "link");
  auto result = snapshot_workspace(dir.file("link"), {}, protected_files());
  REQUIRE_FALSE(result.is_ok());
  CHECK(result.status().message().find("symbolic link") != std::string::npos);
  CHECK_FALSE(snapshot_workspace(dir.file("missing"), {}, protected_files()).is_ok());
  CHECK_FALSE(snapshot_workspace(dir.file("real/notes.md"), {}, protected_files()).is_ok());
}

TEST_CASE("FIFOs are findings and never block the walk") {
  TempDir dir;
  make_honest_workspace(dir.path());
  // One with a candidate name (opened without blocking, rejected by fstat) and one elsewhere
  // (rejected from the listing, never opened).
  REQUIRE(::mkfifo(dir.file("kernels/pipe.cu").c_str(), 0600) == 0);
  REQUIRE(::mkfifo(dir.file("pipe.txt").c_str(), 0600) == 0);
  const Snapshot s = take(dir.path());
  CHECK(has_finding(s, "special-file", "kernels/pipe.cu"));
  CHECK(has_finding(s, "special-file", "pipe.txt"));
  CHECK(s.files.count("kernels/pipe.cu") == 0);
}

TEST_CASE("case 45: edited protected files are findings, identical copies are fine") {
  TempDir dir;
  make_honest_workspace(dir.path());
  write_file(dir.file("model.py"), std::string(kModelPy) + "# slower reference\n");
  write_file(dir.file("binding.cpp"),
             "#include \"binding_registry.h\"\n// pristinE\n");  // same size
  const Snapshot s = take(dir.path());
  CHECK(has_finding(s, "protected-file-edited", "model.py"));
  CHECK(has_finding(s, "protected-file-edited", "binding.cpp"));
  CHECK_FALSE(has_finding(s, "protected-file-edited", "binding_registry.h"));
  CHECK(has_ignored(s, "binding_registry.h"));
  CHECK(s.files.count("model.py") == 0);
  CHECK(s.files.count("binding.cpp") == 0);
  // Edits under protected prefixes are never read nor used (the pristine tools run instead).
  write_file(dir.file("utils/compile.py"), "import os; os.system('evil')\n");
  CHECK_FALSE(has_finding(take(dir.path()), "unexpected-file", "utils/compile.py"));
}

TEST_CASE("a protected copy matching an accepted original (CUDA Agent's glue) is fine") {
  TempDir dir;
  make_honest_workspace(dir.path());
  const std::string upstream = "// the glue as another harness released it\n";
  write_file(dir.file("binding_registry.h"), upstream);
  ProtectedFiles files = protected_files();
  CHECK(files.accepted_sha256.at("binding.cpp").size() == 1);
  CHECK(files.accepted_sha256.at("binding_registry.h").at(0).size() == 64);
  files.accepted_sha256["binding_registry.h"].push_back(cudaagent::sha256_hex(upstream));
  auto walked = snapshot_workspace(dir.path().string(), {}, files);
  REQUIRE(walked.is_ok());
  CHECK_MESSAGE(walked.value().findings.empty(), describe(walked.value()));
  CHECK(has_ignored(walked.value(), "binding_registry.h"));
  auto mapped =
      snapshot_from_files({{"binding_registry.h", upstream}, {"binding.cpp", upstream}}, {}, files);
  CHECK(has_ignored(mapped.value(), "binding_registry.h"));
  CHECK(has_finding(mapped.value(), "protected-file-edited", "binding.cpp"));
}

TEST_CASE("case 46 and G7: files that could run or join the build are unexpected") {
  TempDir dir;
  make_honest_workspace(dir.path());
  fs::create_directories(dir.path() / "torch");
  write_file(dir.file("torch/__init__.py"), "raise SystemExit\n");
  write_file(dir.file("sitecustomize.py"), "import os\n");
  write_file(dir.file("evil.pth"), "import os\n");
  write_file(dir.file("numpy.py"), "");
  write_file(dir.file("extra.cu"), "__global__ void k() {}\n");
  write_file(dir.file("hook.cpp"), "static int x = 1;\n");
  write_file(dir.file("kernels/libhook.so"), "ELF");
  write_file(dir.file("kernels/helper.cc"), "");  // only .cu .cuh .h .cpp
  write_file(dir.file("kernels/helper.hpp"), "");
  write_file(dir.file("kernels/bad-stem.cu"), "");  // '-' is not a stem byte
  fs::create_directories(dir.path() / "kernels" / "sub");
  write_file(dir.file("kernels/sub/deep.cu"), "");  // kernels/ is flat
  const Snapshot s = take(dir.path());
  for (const char* path : {"torch/__init__.py", "sitecustomize.py", "evil.pth", "numpy.py",
                           "extra.cu", "hook.cpp", "kernels/libhook.so", "kernels/helper.cc",
                           "kernels/helper.hpp", "kernels/bad-stem.cu", "kernels/sub/deep.cu"}) {
    CHECK_MESSAGE(has_finding(s, "unexpected-file", path), std::string(path));
  }
  CHECK(names(s) == std::vector<std::string>{"kernels/axpby.cu", "kernels/axpby_binding.cpp",
                                             "kernels/common.cuh", "model_new.py"});
}

TEST_CASE("size limits: one file, a file at the limit, and the whole workspace") {
  TempDir dir;
  make_honest_workspace(dir.path());
  SnapshotLimits limits;
  limits.max_file_bytes = 100;
  limits.max_total_bytes = 250;
  write_file(dir.file("kernels/big.cu"), std::string(101, 'x'));
  write_file(dir.file("kernels/edge.cu"), std::string(100, 'y'));
  Snapshot s = take(dir.path(), limits);
  CHECK(has_finding(s, "file-too-large", "kernels/big.cu"));
  CHECK(s.files.count("kernels/edge.cu") == 1);
  write_file(dir.file("kernels/more.cu"), std::string(100, 'z'));
  write_file(dir.file("kernels/most.cu"), std::string(100, 'w'));
  s = take(dir.path(), limits);
  CHECK(std::any_of(s.findings.begin(), s.findings.end(),
                    [](const PolicyFinding& f) { return f.rule == "workspace-too-large"; }));
}

TEST_CASE("too many entries stops the walk with one finding") {
  TempDir dir;
  make_honest_workspace(dir.path());
  for (int i = 0; i < 50; ++i) write_file(dir.file("note" + std::to_string(i) + ".txt"), "");
  SnapshotLimits limits;
  limits.max_files = 20;
  const Snapshot s = take(dir.path(), limits);
  CHECK(std::count_if(s.findings.begin(), s.findings.end(),
                      [](const PolicyFinding& f) { return f.rule == "too-many-files"; }) == 1);
  CHECK(s.ignored.size() + s.files.size() <= 20);
}

TEST_CASE("bad names and deep nesting are findings") {
  TempDir dir;
  make_honest_workspace(dir.path());
  write_file(dir.file("my notes.md"), "");
  write_file(dir.file("-rf"), "");
  write_file(dir.file("caf\xc3\xa9.txt"), "");
  write_file(dir.file("x\x1b[2J.txt"), "");
  write_file(dir.file(std::string(129, 'n')), "");
  fs::create_directories(dir.path() / "a" / "b" / "c" / "d");
  write_file(dir.file("a/b/c/ok.md"), "");
  write_file(dir.file("a/b/c/d/too-deep.md"), "");
  fs::create_directories(dir.path() / "e" / "f" / "g" / "h");  // empty: nothing deeper to hide
  const Snapshot s = take(dir.path());
  CHECK(has_finding(s, "bad-name", "my notes.md"));
  CHECK(has_finding(s, "bad-name", "-rf"));
  CHECK(has_finding(s, "bad-name", "caf\\xc3\\xa9.txt"));
  CHECK(has_finding(s, "bad-name", "x\\x1b[2J.txt"));  // escaped: safe on a terminal
  CHECK(has_finding(s, "bad-name", std::string(129, 'n')));
  CHECK(has_finding(s, "too-deep", "a/b/c/d"));
  CHECK(has_ignored(s, "a/b/c/ok.md"));
  CHECK_FALSE(has_finding(s, "too-deep", "e/f/g/h"));
}

TEST_CASE("snapshot_from_files refuses untrusted names and applies the same policy") {
  const std::map<std::string, std::string> files = {
      {"model_new.py", "import cuda_extension\n"},
      {"kernels/a.cu", "__global__ void k() {}\n"},
      {"kernels/a_binding.cpp", "REGISTER_BINDING(a, f);\n"},
      {"model.py", kModelPy},
      {"binding.cpp", "// edited\n"},
      {"utils/verification.py", "print('pass')\n"},
      {".git/config", ""},
      {"README.md", ""},
      {"sitecustomize.py", ""},
      {"../x", ""},
      {"/abs", ""},
      {"a\\b", ""},
      {"kernels/../../x", ""},
      {"kernels//b.cu", ""},
      {"./model_new.py", ""},
      {"kernels/", ""},
      {std::string("nul\0.cu", 7), ""},
      {"a/b/c/d/e.md", ""},
  };
  auto result = snapshot_from_files(files, {}, protected_files());
  REQUIRE(result.is_ok());
  const Snapshot& s = result.value();
  CHECK(names(s) ==
        std::vector<std::string>{"kernels/a.cu", "kernels/a_binding.cpp", "model_new.py"});
  for (const char* path : {"../x", "/abs", "a\\x5cb", "kernels/../../x", "kernels//b.cu",
                           "./model_new.py", "kernels/", "nul\\x00.cu"}) {
    CHECK_MESSAGE(has_finding(s, "bad-name", path), std::string(path));
  }
  CHECK(has_finding(s, "protected-file-edited", "binding.cpp"));
  CHECK(has_finding(s, "unexpected-file", "sitecustomize.py"));
  CHECK(has_finding(s, "too-deep", "a/b/c/d/e.md"));
  CHECK(has_ignored(s, "model.py"));
  CHECK(has_ignored(s, "utils/verification.py"));
  CHECK(has_ignored(s, ".git/config"));
  CHECK(has_ignored(s, "README.md"));
}

TEST_CASE("the content hash depends on candidate bytes only, not on order or extras") {
  TempDir dir;
  make_honest_workspace(dir.path());
  const Snapshot walked = take(dir.path());
  // The same candidate given as a map, in another insertion order and with other ignored extras.
  std::map<std::string, std::string> files;
  for (auto it = walked.files.rbegin(); it != walked.files.rend(); ++it) files.insert(*it);
  files["notes.md"] = "different notes";
  auto mapped = snapshot_from_files(files, {}, protected_files());
  REQUIRE(mapped.is_ok());
  CHECK(mapped.value().content_hash == walked.content_hash);
  CHECK(take(dir.path()).content_hash == walked.content_hash);
  write_file(dir.file("kernels/axpby.cu"), "__global__ void k() { }\n");
  CHECK(take(dir.path()).content_hash != walked.content_hash);
  // Framing: moving a byte between name and content changes the hash.
  auto a = snapshot_from_files({{"kernels/ab.cu", "c"}}, {}, protected_files());
  auto b = snapshot_from_files({{"kernels/a.cu", "bc"}}, {}, protected_files());
  CHECK(a.value().content_hash != b.value().content_hash);
}

TEST_CASE("materialize writes exactly the snapshot and the pristine files, privately") {
  TempDir src, dest;
  make_honest_workspace(src.path());
  write_file(src.file("model.py"), "edited");  // the pristine copy must win
  const Snapshot s = take(src.path());
  const std::string out = dest.file("build-1");
  REQUIRE(materialize(s, protected_files(), out).is_ok());

  std::vector<std::string> written;
  for (const auto& entry : fs::recursive_directory_iterator(out)) {
    if (entry.is_regular_file()) written.push_back(fs::relative(entry.path(), out).string());
  }
  std::sort(written.begin(), written.end());
  CHECK(written == std::vector<std::string>{"binding.cpp", "binding_registry.h", "kernels/axpby.cu",
                                            "kernels/axpby_binding.cpp", "kernels/common.cuh",
                                            "model.py", "model_new.py"});
  CHECK(read_file(out + "/model.py") == kModelPy);
  CHECK(read_file(out + "/kernels/axpby.cu") == s.files.at("kernels/axpby.cu"));
  struct stat st {};
  REQUIRE(::stat(out.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);

  // A non-empty destination is refused; an empty existing one is accepted.
  CHECK_FALSE(materialize(s, protected_files(), out).is_ok());
  fs::create_directory(dest.path() / "empty");
  CHECK(materialize(s, protected_files(), dest.file("empty")).is_ok());
  // A destination that is a symlink to an empty folder is refused too.
  fs::create_directory(dest.path() / "target");
  fs::create_directory_symlink(dest.path() / "target", dest.path() / "link");
  CHECK_FALSE(materialize(s, protected_files(), dest.file("link")).is_ok());
  CHECK(fs::is_empty(dest.path() / "target"));
}

TEST_CASE("materialize refuses a hand-made snapshot with unsafe or protected names") {
  TempDir dest;
  for (const char* name :
       {"../escape.cu", "/tmp/x.cu", "kernels/../../x.cu", "model.py", "torch/__init__.py"}) {
    Snapshot s;
    s.files[name] = "x";
    CHECK_FALSE_MESSAGE(materialize(s, protected_files(), dest.file("out")).is_ok(),
                        std::string(name));
    CHECK_FALSE(fs::exists(dest.path() / "out"));
  }
  CHECK_FALSE(fs::exists(dest.path().parent_path() / "escape.cu"));
}
