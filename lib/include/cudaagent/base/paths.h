// Where cudaagent's runtime assets (share/: the Python harness, pristine workspace files,
// examples) and caches live, so tools work from the build tree, from an install, and on a cluster.
#pragma once

#include <string>

namespace cudaagent {

// The share directory: $CUDAAGENT_SHARE_DIR, else <executable dir>/../share/cudaagent when it
// exists (an install), else the source tree's share/ (a build tree).
std::string share_dir();

// A shared library installed beside the programs: <executable dir>/../lib/NAME (a build tree, or
// an install with lib as its library directory), else ../lib64/NAME, else
// ../lib/<multiarch>/NAME (Debian's GNUInstallDirs). Empty when none of them is a regular file.
std::string installed_library(const std::string& name);

// The cache directory: $CUDAAGENT_CACHE_DIR, else $XDG_CACHE_HOME/cudaagent, else
// ~/.cache/cudaagent. Created (0700) if missing; empty string when it cannot be.
std::string cache_dir();

}  // namespace cudaagent
