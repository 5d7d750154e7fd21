// The --build-* flags of the stages that build candidates (cudaagent-verify, cudaagent-profile):
// one function, so both tools spell and document the compiler limits the same way.
#pragma once

#include <CLI/CLI.hpp>

#include "cudaagent/candidate/build_limits.h"

namespace cudaagent {

// Adds --build-memory MIB, --build-cpu SECONDS, --build-timeout SECONDS, --build-file-size MIB,
// --build-open-files N, --build-budget SECONDS, --build-cpu-budget SECONDS and
// --build-max-sources N to `app`, writing into `limits` (whose values are the defaults shown).
void add_build_limit_flags(CLI::App& app, BuildLimits& limits);

}  // namespace cudaagent
