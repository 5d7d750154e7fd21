// Helpers shared by the unit tests: temporary directories and files, parsing JSON text back, and
// finding python3 on PATH.
#pragma once

#include <simdjson.h>

#include "cudaagent/base/files.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

namespace cudaagent::testing {

// A fresh directory under the system temp dir, removed with everything in it on destruction. A
// directory that cannot be made throws, which fails the test case that wanted it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cudaagent-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Through cudaagent::read_whole_file: GCC 12 at -O3 reports a false null dereference inside
// <streambuf> for the istreambuf_iterator form.
inline std::string read_file(const std::string& path) {
  std::string bytes;
  (void)cudaagent::read_whole_file(path, bytes);
  return bytes;
}

// Whether `text` is one valid JSON document (simdjson's own validation).
inline bool is_valid_json(const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::dom::element ignored;
  return parser.parse(text).get(ignored) == simdjson::SUCCESS;
}

// python3 found on PATH the way a shell would (the policy helpers are started with no PATH).
inline std::string python3_on_path() {
  std::istringstream path(std::getenv("PATH") != nullptr ? std::getenv("PATH") : "/usr/bin");
  for (std::string dir; std::getline(path, dir, ':');) {
    const std::string candidate = dir + "/python3";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "/usr/bin/python3";
}

}  // namespace cudaagent::testing
