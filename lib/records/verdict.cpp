// Names of the verdicts, in one table so that parsing and printing cannot drift apart.
#include "cudaagent/records/verdict.h"

#include <array>
#include <utility>

namespace cudaagent {
namespace {
constexpr std::array<std::pair<Verdict, std::string_view>, 9> kNames{{
    {Verdict::kPass, "PASS"},
    {Verdict::kFailCompile, "FAIL_COMPILE"},
    {Verdict::kFailIncorrect, "FAIL_INCORRECT"},
    {Verdict::kFailRuntime, "FAIL_RUNTIME"},
    {Verdict::kFailTimeout, "FAIL_TIMEOUT"},
    {Verdict::kFailResource, "FAIL_RESOURCE"},
    {Verdict::kRejectPolicy, "REJECT_POLICY"},
    {Verdict::kFlagHack, "FLAG_HACK"},
    {Verdict::kInfraError, "INFRA_ERROR"},
}};
}  // namespace

std::string_view verdict_name(Verdict verdict) {
  for (const auto& [value, name] : kNames) {
    if (value == verdict) return name;
  }
  return "UNKNOWN";
}

std::optional<Verdict> parse_verdict(std::string_view name) {
  for (const auto& [value, text] : kNames) {
    if (text == name) return value;
  }
  return std::nullopt;
}

}  // namespace cudaagent
