// The build driver with a stand-in compiler (a shell script that records what it was asked to do),
// so the driver's own logic runs in milliseconds: here, that builds starting cold at once build
// the precompiled torch header once between them, not once each.
#include "cudaagent/candidate/extension_build.h"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "test_support.h"

using namespace cudaagent;

namespace {

// Answers --version; otherwise writes the file after -o, and appends "header" or "object" to
// $dir/calls. The header takes a second, long enough for the other builds to find it being made;
// an object takes 0.3 s, so the builds compile the shared binding.cpp at the same time (each must
// write its own temporary: sharing one, all but the first rename failed).
std::string fake_compiler(const testing::TempDir& dir) {
  const std::string path = dir.file("fake-g++");
  testing::write_file(path, "#!/bin/sh\n"
                            "[ \"$1\" = --version ] && { echo 'fake-g++ 1.0'; exit 0; }\n"
                            "out=; kind=object; prev=\n"
                            "for a in \"$@\"; do\n"
                            "  [ \"$prev\" = -o ] && out=$a\n"
                            "  [ \"$a\" = c++-header ] && kind=header\n"
                            "  prev=$a\n"
                            "done\n"
                            "[ $kind = header ] && sleep 1\n"
                            "[ $kind = object ] && sleep 0.3\n"
                            "echo $kind >>'" + dir.file("calls") + "'\n"
                            "echo built >\"$out\"\n");
  ::chmod(path.c_str(), 0755);
  return path;
}

std::string workspace(const testing::TempDir& dir, const std::string& name) {
  const std::string root = dir.file(name);
  std::filesystem::create_directories(root + "/kernels");
  testing::write_file(root + "/binding.cpp", "#include <torch/extension.h>\n");
  testing::write_file(root + "/kernels/k.cpp", "#include <torch/extension.h>\n// " + name + "\n");
  return root;
}

int count_lines(const std::string& text, const std::string& line) {
  int n = 0;
  std::size_t at = 0;
  while ((at = text.find(line + "\n", at)) != std::string::npos) ++n, at += line.size() + 1;
  return n;
}

}  // namespace

TEST_CASE("builds that start cold at once precompile the torch header once between them") {
  testing::TempDir dir;
  BuildOptions options;
  options.cuda = false;
  options.cxx = fake_compiler(dir);
  options.cache_dir = dir.file("cache");
  options.jobs = 1;
  const TorchEnv torch;
  constexpr int kBuilds = 3;
  std::vector<std::future<Result<BuildResult>>> builds;
  for (int i = 0; i < kBuilds; ++i) {
    const std::string name = "w" + std::to_string(i);
    builds.push_back(std::async(std::launch::async, [&, name, ws = workspace(dir, name)] {
      return build_extension(ws, dir.file("out-" + name), torch, options);
    }));
  }
  int made_header = 0;
  for (auto& build : builds) {
    auto result = build.get();
    REQUIRE_MESSAGE(result, result.status().message());
    CHECK_MESSAGE(result.value().ok, std::string(result.value().diagnostics + result.value().log));
    for (const auto& step : result.value().steps) made_header += step.source == "(precompiled torch header)";
  }
  const std::string calls = testing::read_file(dir.file("calls"));
  CHECK(made_header == 1);
  CHECK(count_lines(calls, "header") == 1);
  // Each build compiled its own kernel; binding.cpp's object is shared through the cache.
  CHECK(count_lines(calls, "object") >= kBuilds);
}
