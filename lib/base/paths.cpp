// Runtime asset and cache locations. The source tree's share/ is compiled in as the last resort so
// tests and the quick start work straight from a build directory.
#include "cudaagent/base/paths.h"

#include <cstdlib>
#include <filesystem>

#include "cudaagent/base/files.h"

#ifndef CUDAAGENT_SOURCE_SHARE_DIR
#define CUDAAGENT_SOURCE_SHARE_DIR ""
#endif

namespace cudaagent {
namespace fs = std::filesystem;

std::string share_dir() {
  if (const char* env = std::getenv("CUDAAGENT_SHARE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "cudaagent";
    if (fs::is_directory(installed / "harness", error)) return installed.string();
  }
  return CUDAAGENT_SOURCE_SHARE_DIR;
}

std::string installed_library(const std::string& name) {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error) return {};
  const fs::path prefix = exe.parent_path().parent_path();
  for (const fs::path& dir : {prefix / "lib", prefix / "lib64", prefix / "lib" / "x86_64-linux-gnu",
                              prefix / "lib" / "aarch64-linux-gnu"}) {
    if (fs::is_regular_file(dir / name, error)) return (dir / name).string();
  }
  return {};
}

std::string cache_dir() {
  std::string path;
  if (const char* env = std::getenv("CUDAAGENT_CACHE_DIR"); env != nullptr && *env != '\0') {
    path = env;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    path = std::string(xdg) + "/cudaagent";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    path = std::string(home) + "/.cache/cudaagent";
  } else {
    return {};
  }
  return make_directories(path) ? path : std::string();
}

}  // namespace cudaagent
