#!/usr/bin/env bash
# Issue 11: --call-diagnostics records where each model's timed calls spend their time
# (call_cost.phases_ms), without changing the verdict. Every phase of an honest run lies between
# zero and the whole call as the owner timed it, and the owner's clock and the runners' readings
# line up (the same CLOCK_MONOTONIC), so a message never arrives before it was sent. Each phase
# comes with its standard deviation over the calls (sd_<phase>).
source "$(dirname "$0")/lib.sh"
ws=$(workspace honest)
profile --call-diagnostics "$ws" >"$scratch/out.json" || fail "exited $?"
[[ $(field .profile.verdict "$scratch/out.json") == PASS ]] || fail "$(jq -c .profile "$scratch/out.json" | cut -c1-600)"
[[ $(field .profile.settings.call_diagnostics "$scratch/out.json") == true ]] || fail "settings do not say so"
phases=$(jq -c .profile.call_cost.phases_ms "$scratch/out.json")
for model in null candidate eager; do
  jq -e --arg m "$model" '.[$m] | has("to_runner") and has("forward") and has("outputs_out") and has("to_owner") and has("total")' \
    <<<"$phases" >/dev/null || fail "no phases for $model: $phases"
  jq -e --arg m "$model" '.[$m] as $p | [$p | to_entries[] | select(.key != "total" and (.key | startswith("sd_") | not)) | .value]
      | all(. >= 0 and . <= $p.total)' <<<"$phases" >/dev/null ||
    fail "a phase of $model outside [0, the call]: $phases"
  # Beside each phase, its spread over the calls (what carries the variance).
  jq -e --arg m "$model" '.[$m] as $p | [$p | keys[] | select(startswith("sd_") | not)]
      | all(. as $k | $p["sd_" + $k] | type == "number" and . >= 0)' <<<"$phases" >/dev/null ||
    fail "a phase of $model without its spread: $phases"
done
# The CPU has no CUDA events: the forward's device time is 0 there, and the null model runs none.
jq -e '.null.forward_gpu == 0 and .eager.forward_gpu == 0' <<<"$phases" >/dev/null || fail "device time on the CPU: $phases"
# Without the flag the record carries no phases.
profile "$ws" >"$scratch/plain.json" || fail "plain run exited $?"
[[ $(jq -r '.profile.call_cost.phases_ms // "none"' "$scratch/plain.json") == none ]] || fail "phases without --call-diagnostics"
echo ok
