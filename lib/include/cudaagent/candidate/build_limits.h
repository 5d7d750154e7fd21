// Limits on the compilers that build a candidate (cudaagent(7), SANDBOX): every compiler process
// (nvcc and its children, g++ and cc1plus, the assembler, the linker) runs under memory, CPU-time,
// file-size and open-file limits, and the whole build under a wall-clock and a CPU budget and a
// cap on its translation units. Key choice: a build that hits a limit is a verdict with the limit
// named (FAIL_RESOURCE), told apart from a compile error (FAIL_COMPILE) by how the process ended
// and by what the compiler drivers say about their children. The candidate can imitate such a
// line (a static_assert message may hold a newline), which at worst turns its FAIL_COMPILE into
// FAIL_RESOURCE: both are failures with the same reward, and neither can become a PASS.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "cudaagent/sandbox/process.h"

namespace cudaagent {

// Defaults measured on honest builds (bench/measure_build.sh, torch 1.13 on Debian 12 under load):
// the precompiled torch header 1.8 GiB resident, 31 CPU s, 656 MB written; a binding with it
// 1.2 GiB, 11 CPU s; the example kernel through nvcc 0.2 GiB, under 1 CPU s. Each default leaves
// at least 3x headroom for torch 2.x headers and slower machines.
struct BuildLimits {
  // RLIMIT_AS of every compiler process. Measured: the torch header precompiles under 2.5 GiB.
  // An `#include "/dev/zero"` ends with "out of memory" once cc1plus's buffer cannot double.
  std::uint64_t memory_bytes = std::uint64_t{6} << 30;
  // RLIMIT_CPU of every compiler process (each child of nvcc or g++ has its own).
  std::uint64_t cpu_seconds = 300;
  // Wall-clock limit of one compiler command.
  double process_seconds = 300;
  // RLIMIT_FSIZE of the candidate's compiles and the link: no object, temporary or module larger.
  std::uint64_t file_size_bytes = std::uint64_t{256} << 20;
  // RLIMIT_FSIZE of the precompiled torch header, a trusted step with no candidate input (656 MB
  // measured with torch 1.13).
  std::uint64_t header_file_size_bytes = std::uint64_t{4} << 30;
  // RLIMIT_NOFILE of every compiler process.
  std::uint64_t open_files = 512;
  // The candidate's build, from its first compile to the end of the link: wall-clock seconds, and
  // CPU seconds summed over every finished compiler command (its waited-for children included).
  // The precompiled torch header, made once per toolchain with no candidate input, is not counted.
  double build_seconds = 900;
  double build_cpu_seconds = 1800;
  // Translation units of the candidate (kernels/*.cu and kernels/*.cpp); more is FAIL_RESOURCE
  // before anything is compiled.
  std::size_t max_sources = 32;
};

// How one compiler command ended, as the build sees it.
enum class StepFailure {
  kNone,      // it succeeded
  kCompile,   // the compiler rejected the code: FAIL_COMPILE
  kResource,  // a limit ended it: FAIL_RESOURCE
};

struct StepOutcome {
  StepFailure failure = StepFailure::kNone;
  std::string reason;  // for kResource: "memory limit (6144 MiB) reached: cc1plus: out of memory"
};

// Judges one finished compiler command (not kSpawnFailed: that is the machinery's failure). `run`
// is what run_process returned, possibly through the sandbox, where a signal N reads as exit code
// 128+N; `cpu_limit` and `timeout` are the limits it ran under after the build budget was applied.
// Resource words count only on lines that begin with a compiler's name ("cc1plus: out of memory
// allocating ...", "nvcc error   : 'cicc' died due to signal 9"). Pure function; thread-safe.
StepOutcome judge_compiler_run(const ProcessResult& run, const BuildLimits& limits,
                               std::uint64_t cpu_limit, double timeout);

// The process limits of one compiler command (RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE)
// with `cpu_seconds` in place of limits.cpu_seconds (the build budget may lower it).
ProcessLimits compiler_process_limits(const BuildLimits& limits, std::uint64_t cpu_seconds,
                                      bool precompiled_header);

// The whole build's budget, shared by the compiler threads of one build. The caller passes the
// elapsed wall time (so tests need no clock); CPU is charged from each finished command.
// Thread-safe.
class BuildBudget {
 public:
  explicit BuildBudget(const BuildLimits& limits) : limits_(limits) {}

  struct Allowance {
    bool exhausted = false;
    std::string reason;             // why nothing more may run, when exhausted
    double timeout = 0;             // for the next command: min(per command, wall left)
    std::uint64_t cpu_seconds = 0;  // min(per process, CPU left), at least 1
  };
  // What the next command may use, `elapsed` seconds after the build started.
  Allowance allowance(double elapsed) const;
  // Adds a finished command's CPU seconds (user + system).
  void charge(double cpu_seconds);
  double cpu_used() const;

 private:
  const BuildLimits& limits_;
  mutable std::mutex mutex_;
  double cpu_used_ = 0;
};

// "6144 MiB" for people and records.
std::string describe_mebibytes(std::uint64_t bytes);

}  // namespace cudaagent
