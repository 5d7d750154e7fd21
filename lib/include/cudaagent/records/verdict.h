// The verdict vocabulary (cudaagent(7), VERDICTS): exactly one per evaluation, shared by verify, profile
// and reward.
#pragma once

#include <optional>
#include <string_view>

namespace cudaagent {

enum class Verdict {
  kPass,
  kFailCompile,
  kFailIncorrect,
  kFailRuntime,
  kFailTimeout,
  kFailResource,
  kRejectPolicy,
  kFlagHack,
  kInfraError,
};

// "PASS", "FAIL_COMPILE", ... as written in records.
std::string_view verdict_name(Verdict verdict);
// The verdict named exactly `name`, or nullopt for anything else (case matters).
std::optional<Verdict> parse_verdict(std::string_view name);

}  // namespace cudaagent
