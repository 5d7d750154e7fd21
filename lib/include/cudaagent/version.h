// Build identity and the versions of every dependency, for `--version` and for records that must
// say which software produced them.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace cudaagent {

// Defined in the generated build_info.cpp (cmake/WriteBuildInfo.cmake).
const char* build_version();
const char* build_commit();

// (name, version) pairs: cudaagent, commit, compiler, simdjson, CLI11, SQLite, OpenSSL, and when
// built with CUDA the toolkit, NVRTC, CUPTI and driver (the driver read at run time: "none" on a
// machine without one). Thread-safe.
std::vector<std::pair<std::string, std::string>> dependency_versions();

// The text `--version` prints: "cudaagent-<program> <version> (<commit>)" and one line per entry
// of dependency_versions(), then of `extra` (libraries only one program links, such as torch).
std::string version_text(const std::string& program,
                         const std::vector<std::pair<std::string, std::string>>& extra = {});

}  // namespace cudaagent
