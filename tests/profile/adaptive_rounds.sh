#!/usr/bin/env bash
# Adaptive rounds: after --rounds, the profile goes on round by round until the interval's relative
# half-width is at most --target-ci, --rounds-seconds are spent or --max-rounds have run, and the
# record says how many ran and why they stopped. Fixed rounds (the default) say "fixed"; settings
# that cannot adapt are refused.
# No assertion rests on a timing: a target of 1e-9 cannot be met by measured times, and a met
# target must be consistent with the half-width the record reports.
source "$(dirname "$0")/lib.sh"
ws=$(workspace honest)
profile "$ws" >"$scratch/fixed.json" || fail "fixed: exited $?"
jq -e '.profile.verdict == "PASS" and .profile.rounds.run == 4 and .profile.rounds.stop == "fixed"
       and .profile.settings.max_rounds == 4 and .profile.settings.target_ci == 0' "$scratch/fixed.json" >/dev/null ||
  fail "fixed rounds: $(jq -c '[.profile.verdict, .profile.rounds, .profile.settings]' "$scratch/fixed.json")"

# A target no measurement meets: every round up to the most (the helper asks for 4 rounds).
profile --max-rounds 6 --target-ci 1e-9 "$ws" >"$scratch/most.json" || fail "most: exited $?"
jq -e '.profile.verdict == "PASS" and .profile.rounds.run == 6 and .profile.rounds.stop == "max_rounds"
       and (.profile.rounds.half_width > 1e-9) and (.profile.times_ms.candidate.rounds == 6)
       and (.profile.speedup.eager.rounds == 6)' "$scratch/most.json" >/dev/null ||
  fail "unmet target: $(jq -c '[.profile.verdict, .profile.rounds, .profile.times_ms.candidate.rounds, .profile.speedup.eager]' "$scratch/most.json")"
[[ $(field .profile.baselines.key "$scratch/most.json") != $(field .profile.baselines.key "$scratch/fixed.json") ]] ||
  fail "one baseline key for fixed and adaptive rounds"

# A loose target: it stops at the least rounds whose interval meets it, or runs them all.
profile --max-rounds 8 --target-ci 0.9 "$ws" >"$scratch/loose.json" || fail "loose: exited $?"
jq -e '.profile.verdict == "PASS" and (.profile.rounds.run >= 4) and (.profile.rounds.run <= 8)
       and .profile.times_ms.candidate.rounds == .profile.rounds.run
       and (if .profile.rounds.stop == "target" then .profile.rounds.half_width <= 0.9
            else .profile.rounds.stop == "max_rounds" and .profile.rounds.run == 8 end)' "$scratch/loose.json" >/dev/null ||
  fail "loose target: $(jq -c '[.profile.verdict, .profile.rounds, .profile.times_ms.candidate.rounds]' "$scratch/loose.json")"

# A time limit no four rounds of calls fit in (a millisecond): they stop at --rounds, on time, met
# target or not; with no target, the time limit alone makes the rounds adaptive. The baseline key
# changes with the limit.
profile --max-rounds 6 --target-ci 1e-9 --rounds-seconds 0.001 "$ws" >"$scratch/time.json" ||
  fail "time: exited $?"
jq -e '.profile.verdict == "PASS" and .profile.rounds.run == 4 and .profile.rounds.stop == "time"
       and .profile.settings.rounds_seconds == 0.001 and .profile.times_ms.candidate.rounds == 4' \
  "$scratch/time.json" >/dev/null ||
  fail "time limit: $(jq -c '[.profile.verdict, .profile.rounds, .profile.settings]' "$scratch/time.json")"
profile --max-rounds 8 --rounds-seconds 0.001 "$ws" >"$scratch/time_only.json" || fail "time only: exited $?"
jq -e '.profile.rounds.run == 4 and .profile.rounds.stop == "time"' "$scratch/time_only.json" >/dev/null ||
  fail "time limit without a target: $(jq -c '.profile.rounds' "$scratch/time_only.json")"
[[ $(field .profile.baselines.key "$scratch/time.json") != $(field .profile.baselines.key "$scratch/most.json") ]] ||
  fail "one baseline key with and without --rounds-seconds"

# Settings that cannot adapt: refused before anything runs, with the reason.
code=0
profile --target-ci 0.05 "$ws" >"$scratch/none.json" 2>"$scratch/none.err" || code=$?
[[ $code != 0 ]] && grep -q -- "--target-ci needs --max-rounds above --rounds" "$scratch/none.err" ||
  fail "--target-ci without --max-rounds: exit $code: $(cat "$scratch/none.err")"
code=0
profile --rounds-seconds 3 "$ws" >"$scratch/none.json" 2>"$scratch/none.err" || code=$?
[[ $code != 0 ]] && grep -q -- "--rounds-seconds needs --max-rounds above --rounds" "$scratch/none.err" ||
  fail "--rounds-seconds without --max-rounds: exit $code: $(cat "$scratch/none.err")"
code=0
profile --max-rounds 2 "$ws" >"$scratch/below.json" 2>"$scratch/below.err" || code=$?
[[ $code != 0 ]] && grep -q -- "--max-rounds 2 is below --rounds 4" "$scratch/below.err" ||
  fail "--max-rounds below --rounds: exit $code: $(cat "$scratch/below.err")"
echo ok
