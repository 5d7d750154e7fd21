// The --build-* flags of the stages that build candidates (cudaagent-verify, cudaagent-profile,
// cudaagent-rollout's evaluator):
// one function, so both tools spell and document the compiler limits the same way. Inline, in the
// header: the two stage files include CLI11 already, and a translation unit of its own would parse
// CLI11 once more per build. Sizes are given in MiB and kept in bytes; a zero or negative limit is
// a usage error, never "no limit".
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "cudaagent/candidate/build_limits.h"

namespace cudaagent {
namespace build_flags_detail {

inline void add_mebibytes(CLI::App& app, const std::string& name, std::uint64_t& bytes,
                          const std::string& help) {
  app.add_option_function<std::uint64_t>(
         name, [&bytes](std::uint64_t mib) { bytes = mib << 20; }, help)
      ->type_name("MIB")
      ->default_str(std::to_string(bytes >> 20))
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 24));
}

}  // namespace build_flags_detail

// Adds --build-memory MIB, --build-cpu SECONDS, --build-timeout SECONDS, --build-file-size MIB,
// --build-open-files N, --build-budget SECONDS, --build-cpu-budget SECONDS and
// --build-max-sources N to `app`, writing into `limits` (whose values are the defaults shown).
inline void add_build_limit_flags(CLI::App& app, BuildLimits& limits) {
  build_flags_detail::add_mebibytes(app, "--build-memory", limits.memory_bytes,
                                    "Address-space limit of each compiler process (nvcc, cicc, ptxas, g++, cc1plus, "
                                    "as, ld), in MiB");
  app.add_option("--build-cpu", limits.cpu_seconds, "CPU-time limit of each compiler process")
      ->type_name("SECONDS")->capture_default_str()->check(CLI::Range(1, 86400));
  app.add_option("--build-timeout", limits.process_seconds,
                 "Wall-clock limit of each compiler command")
      ->type_name("SECONDS")->capture_default_str()->check(CLI::Range(1.0, 86400.0));
  build_flags_detail::add_mebibytes(app, "--build-file-size", limits.file_size_bytes,
                "Largest file a compiler of the candidate's sources or the linker may write, in "
                "MiB");
  app.add_option("--build-open-files", limits.open_files,
                 "Open-files limit of each compiler process")
      ->type_name("N")->capture_default_str()->check(CLI::Range(16, 1 << 20));
  app.add_option("--build-budget", limits.build_seconds,
                 "Wall-clock budget of one candidate's build (all its compiles and the link)")
      ->type_name("SECONDS")->capture_default_str()->check(CLI::Range(1.0, 86400.0));
  app.add_option("--build-cpu-budget", limits.build_cpu_seconds,
                 "CPU budget of one candidate's build, summed over its compiler commands")
      ->type_name("SECONDS")->capture_default_str()->check(CLI::Range(1.0, 864000.0));
  app.add_option("--build-max-sources", limits.max_sources,
                 "Most translation units (kernels/*.cu, kernels/*.cpp) a candidate may have")
      ->type_name("N")->capture_default_str()->check(CLI::Range(1, 4096));
}

// Adds --build-host-opt LEVEL (0-3; default 2, or $CUDAAGENT_BUILD_HOST_OPT): the host
// compiler's -O level for the candidate's C++.
inline void add_build_host_opt_flag(CLI::App& app, int& level) {
  app.add_option("--build-host-opt", level,
                 "The host compiler's -O level for the candidate's C++ (nvcc keeps -O3); 1 "
                 "builds faster where the C++ is not what is timed")
      ->type_name("LEVEL")->envname("CUDAAGENT_BUILD_HOST_OPT")->capture_default_str()
      ->check(CLI::Range(0, 3));
}

}  // namespace cudaagent
