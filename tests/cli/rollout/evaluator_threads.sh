#!/usr/bin/env bash
# Episodes that end while other episodes' evaluations run: the evaluator's warm workers must not die
# with the threads of an episode that ended (a child the project spawns gets PR_SET_PDEATHSIG, which
# fires when the thread that spawned it ends). Three episodes at once verify twice each and are
# scored; every evaluation must get a verdict, none an INFRA_ERROR.
source "$(dirname "$0")/../lib.sh"
bin=$1
source "$(dirname "$0")/lib.bash"

start_server reverify.jsonl
run --endpoint "$url" --model m --episodes-per-task 3 --jobs 3 "$task"
[[ $code == 0 ]] || fail "exit $code: $(cat "$scratch/err")"
[[ $(grep -c "\"trajectory\"" "$scratch/out") == 3 ]] || fail "expected 3 records"
verdicts=$(jq -r '.trajectory.evaluations[].verdict, .verify.verdict, (.profile.verdict // "none")' "$scratch/out" | sort | uniq -c | tr -s ' ' | paste -sd,)
[[ $verdicts == " 12 PASS" ]] || fail "evaluations: $verdicts: $(jq -r '.trajectory.messages[] | select(.role == "tool") | .content' "$scratch/out" | grep -A1 INFRA_ERROR | head -4; jq -r '.verify.reason, .profile.reason' "$scratch/out" | grep -i "infra\\|fail" | head -3)"
echo "ok"
