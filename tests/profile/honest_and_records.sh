#!/usr/bin/env bash
# An honest candidate gets a PASS profile that cudaagent-reward can score; in JSONL mode only PASS
# records are timed, others pass through byte for byte, and malformed input becomes error records.
source "$(dirname "$0")/lib.sh"
ws=$(workspace honest)
profile "$ws" >"$scratch/ws.json" || fail "workspace mode exited $?"
[[ $(field .profile.verdict "$scratch/ws.json") == PASS ]] || fail "honest: $(jq -c .profile "$scratch/ws.json" | cut -c1-600)"
for arm in eager candidate; do
  median=$(field ".profile.times_ms.$arm.median" "$scratch/ws.json")
  awk -v m="$median" 'BEGIN { exit !(m > 0) }' || fail "$arm median is $median"
  [[ $(field ".profile.times_ms.$arm.rounds" "$scratch/ws.json") == 4 ]] || fail "$arm rounds"
done
# The cost of a call measured in both runners' processes, a median for every round: the baseline's
# is removed from the baselines' samples, the lower of the two from the candidate's.
[[ $(field '.profile.call_cost.candidate_arm.round_medians_ms | length' "$scratch/ws.json") == 4 ]] ||
  fail "candidate arm's call cost: $(jq -c .profile.call_cost "$scratch/ws.json")"
awk -v m="$(field .profile.call_cost.candidate_arm.low_ms "$scratch/ws.json")" 'BEGIN { exit !(m > 0) }' ||
  fail "candidate arm's low call cost: $(jq -c .profile.call_cost "$scratch/ws.json")"
jq -e '.profile.call_cost | .candidate_arm.removed_ms == ([.removed_ms, .candidate_arm.low_ms] | min)' \
  "$scratch/ws.json" >/dev/null || fail "the candidate's removed cost is not the lower one: $(jq -c .profile.call_cost "$scratch/ws.json")"
# Where the candidate's runner is the dearer one, the speedups' intervals reach up to its own cost.
jq -e '.profile.call_cost | .candidate_arm.interval_reaches_own_cost == (.candidate_arm.low_ms > .removed_ms)' \
  "$scratch/ws.json" >/dev/null || fail "interval_reaches_own_cost disagrees with the costs: $(jq -c .profile.call_cost "$scratch/ws.json")"
[[ $(field '.profile.compile.status // .profile.baselines.compile.status' "$scratch/ws.json") == unavailable* ]] ||
  fail "torch 1.13 has no torch.compile, and the record should say so"
[[ $(field '.profile.checks.calls' "$scratch/ws.json") -ge 12 ]] || fail "not every timed call was checked"
[[ $(field '.profile.checks.all_checked' "$scratch/ws.json") == true ]] || fail "not every timed call was checked"
[[ $(field '.profile.speedup.eager.ci95 | length' "$scratch/ws.json") == 2 ]] || fail "no speedup interval"

# JSONL: a PASS record is timed; a FAIL_INCORRECT record passes unchanged; garbage is an error record.
model_py=$(cat "$base/model.py"; echo x); model_py=${model_py%x}
jq -nc --arg m "$model_py" --arg w "$ws" \
  '{id: "pass", task: {model_py: $m}, candidate: {workspace: $w}, verify: {verdict: "PASS"}}' >"$scratch/in.jsonl"
jq -nc --arg m "$model_py" --arg w "$ws" \
  '{id: "wrong", task: {model_py: $m}, candidate: {workspace: $w}, verify: {verdict: "FAIL_INCORRECT"}}' >>"$scratch/in.jsonl"
echo '{"id": "broken", "verify": {"verdict": "PASS"}}' >>"$scratch/in.jsonl"
echo 'not json at all' >>"$scratch/in.jsonl"
profile <"$scratch/in.jsonl" >"$scratch/out.jsonl" || fail "JSONL mode exited $?"
[[ $(wc -l <"$scratch/out.jsonl") == 4 ]] || fail "expected 4 output lines"
[[ $(sed -n 1p "$scratch/out.jsonl" | jq -r .profile.verdict) == PASS ]] || fail "PASS record not profiled"
[[ $(sed -n 2p "$scratch/out.jsonl") == "$(sed -n 2p "$scratch/in.jsonl")" ]] || fail "non-PASS record was changed"
[[ $(sed -n 3p "$scratch/out.jsonl" | jq -r .error.reason) == *task.model_py* ]] || fail "record without a task: $(sed -n 3p "$scratch/out.jsonl")"
[[ $(sed -n 4p "$scratch/out.jsonl" | jq -r '.error.reason') != null ]] || fail "malformed line: no error record"

# The reward stage reads the profile as it is.
sed -n 1p "$scratch/out.jsonl" | "$bin/cudaagent-reward" --quiet >"$scratch/reward.json" || fail "reward exited $?"
value=$(jq -r .reward.value "$scratch/reward.json")
[[ $value == 1 || $value == 2 ]] || fail "reward of a verified, profiled PASS: $(jq -c .reward "$scratch/reward.json")"

# --brief: plain lines for the agent.
profile --brief "$ws" >"$scratch/brief.txt" || fail "--brief exited $?"
grep -q '^verdict: PASS' "$scratch/brief.txt" || fail "brief: $(cat "$scratch/brief.txt")"
grep -q '^speedup over eager' "$scratch/brief.txt" || fail "brief has no speedup line"
echo ok
