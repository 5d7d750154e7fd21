// Compiler limits and the judgement of how a compiler command ended (build_limits.h). What the
// compilers print is read only on lines that begin with a compiler's own name: diagnostics about
// the code begin with a path, and quoted source lines with spaces.
#include "cudaagent/candidate/build_limits.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstdio>

#include "cudaagent/candidate/build_diagnostics.h"

namespace cudaagent {
namespace {

std::string seconds_text(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.0f", seconds);
  return buffer;
}

// The signal that ended the command: directly, or through bwrap, which exits with 128+N when the
// command it ran was killed by signal N.
int ending_signal(const ProcessResult& run) {
  if (run.outcome == ProcessResult::Outcome::kSignaled) return run.signal;
  if (run.outcome == ProcessResult::Outcome::kExited && run.exit_code > 128 &&
      run.exit_code <= 128 + 64) {
    return run.exit_code - 128;
  }
  return 0;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

struct ResourceWords {
  std::string_view words;  // lower case
  std::string_view limit;  // which limit they mean
};

constexpr std::array<ResourceWords, 10> kResourceWords = {{
    {"out of memory", "memory"},
    {"memory exhausted", "memory"},
    {"cannot allocate memory", "memory"},
    {"bad_alloc", "memory"},
    {"cpu time limit exceeded", "cpu"},
    {"file size limit exceeded", "file-size"},
    {"too many open files", "open-files"},
    {"killed signal terminated program", "killed"},
    {"died due to signal", "killed"},
    {"signal terminated program", "killed"},
}};

std::string limit_text(std::string_view limit, const BuildLimits& limits, std::uint64_t cpu_limit) {
  if (limit == "memory") return "memory limit (" + describe_mebibytes(limits.memory_bytes) + ")";
  if (limit == "cpu") {
    return "CPU-time limit (" + std::to_string(cpu_limit) + " s" +
           (cpu_limit < limits.cpu_seconds ? ", what the build's CPU budget had left" : "") + ")";
  }
  if (limit == "file-size") {
    return "file-size limit (" + describe_mebibytes(limits.file_size_bytes) + ")";
  }
  if (limit == "open-files") return "open-files limit (" + std::to_string(limits.open_files) + ")";
  return "a compiler process was killed (memory limit " + describe_mebibytes(limits.memory_bytes) +
         ", CPU-time limit " + std::to_string(cpu_limit) + " s)";
}

std::string first_line_cut(std::string_view line) {
  std::string out(line.substr(0, 200));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

}  // namespace

std::string describe_mebibytes(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

ProcessLimits compiler_process_limits(const BuildLimits& limits, std::uint64_t cpu_seconds,
                                      bool precompiled_header) {
  ProcessLimits out;
  out.address_space_bytes = limits.memory_bytes;
  out.cpu_seconds = std::max<std::uint64_t>(1, cpu_seconds);
  out.file_size_bytes = precompiled_header ? limits.header_file_size_bytes : limits.file_size_bytes;
  out.open_files = limits.open_files;
  return out;
}

StepOutcome judge_compiler_run(const ProcessResult& run, const BuildLimits& limits,
                               std::uint64_t cpu_limit, double timeout) {
  using Outcome = ProcessResult::Outcome;
  if (run.outcome == Outcome::kExited && run.exit_code == 0) return {};
  if (run.outcome == Outcome::kTimedOut) {
    return {StepFailure::kResource, "wall-clock limit (" + seconds_text(timeout) + " s) reached"};
  }
  const double cpu = run.user_cpu_seconds + run.system_cpu_seconds;
  switch (ending_signal(run)) {
    case SIGXCPU:
      return {StepFailure::kResource, limit_text("cpu", limits, cpu_limit) + " reached"};
    case SIGXFSZ:
      return {StepFailure::kResource, limit_text("file-size", limits, cpu_limit) + " reached"};
    case SIGKILL:
      // The kernel's second step after SIGXCPU, or the OOM killer: a limit either way.
      if (cpu + 1.0 >= static_cast<double>(cpu_limit)) {
        return {StepFailure::kResource, limit_text("cpu", limits, cpu_limit) + " reached"};
      }
      return {StepFailure::kResource, limit_text("killed", limits, cpu_limit)};
    default:
      break;
  }
  // A driver (g++, nvcc) reports its child's end in words: read the lines it wrote about itself.
  for (const std::string* text : {&run.err, &run.out}) {
    std::size_t start = 0;
    while (start < text->size()) {
      std::size_t end = text->find('\n', start);
      if (end == std::string::npos) end = text->size();
      const std::string_view line(text->data() + start, end - start);
      start = end + 1;
      if (!is_compiler_tool_line(line)) continue;
      const std::string lowered = lower(line);
      for (const ResourceWords& words : kResourceWords) {
        if (lowered.find(words.words) == std::string::npos) continue;
        return {StepFailure::kResource,
                limit_text(words.limit, limits, cpu_limit) + ": " + first_line_cut(line)};
      }
    }
  }
  return {StepFailure::kCompile, {}};
}

BuildBudget::Allowance BuildBudget::allowance(double elapsed) const {
  std::lock_guard lock(mutex_);
  Allowance out;
  const double wall_left = limits_.build_seconds - elapsed;
  const double cpu_left = limits_.build_cpu_seconds - cpu_used_;
  if (wall_left <= 0) {
    out.exhausted = true;
    out.reason = "build wall-clock budget (" + seconds_text(limits_.build_seconds) + " s) spent";
    return out;
  }
  if (cpu_left < 1) {
    out.exhausted = true;
    out.reason = "build CPU budget (" + seconds_text(limits_.build_cpu_seconds) + " s) spent";
    return out;
  }
  out.timeout = std::min(limits_.process_seconds, wall_left);
  out.cpu_seconds = std::max<std::uint64_t>(
      1, std::min<std::uint64_t>(limits_.cpu_seconds,
                                 static_cast<std::uint64_t>(std::ceil(cpu_left))));
  return out;
}

void BuildBudget::charge(double cpu_seconds) {
  std::lock_guard lock(mutex_);
  cpu_used_ += std::max(0.0, cpu_seconds);
}

double BuildBudget::cpu_used() const {
  std::lock_guard lock(mutex_);
  return cpu_used_;
}

}  // namespace cudaagent
