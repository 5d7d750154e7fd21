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

// (name, version) pairs. Each area reports the libraries it links (records: simdjson, CLI11,
// SQLite; llm: libcurl; ...), so a program's `--version` lists exactly what it was built with.
using VersionList = std::vector<std::pair<std::string, std::string>>;

// This area's part: cudaagent, commit, compiler, OpenSSL, and when built with CUDA the toolkit,
// NVRTC, CUPTI and driver (opened at run time: "none" on a machine without them). Thread-safe.
VersionList base_versions();

// The text `--version` prints: "cudaagent-<program> <version> (<commit>)" and one line per entry.
std::string version_text(const std::string& program, const VersionList& versions);

}  // namespace cudaagent
