#!/usr/bin/env bash
# A task whose first forward call alone is slow (one-time costs, as on a GPU) gets the full number
# of timed runs: the timing job cuts a task short as slow only after more than one slow call.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"
"$records" slow_first_call slow >"$scratch/in.jsonl"
# The window's top (25 ms) puts the slow cut at 75 ms: below the first call's 500 ms.
"$filter" --device cpu --window-ms 0.0001,25 --jobs 1 --runs 7 --timeout 20 "$scratch/in.jsonl" \
  >"$scratch/out.jsonl" 2>"$scratch/err" || fail "exit $?: $(cat "$scratch/err")"
runs() { jq -r --arg id "$1" 'select(.id == $id) | .filter.eager_ms.runs' "$scratch/out.jsonl"; }
[[ $(kept_of "$scratch/out.jsonl" slow_first_call) == true && $(runs slow_first_call) == 7 ]] ||
  fail "slow_first_call: $(jq -c 'select(.id == "slow_first_call") | .filter' "$scratch/out.jsonl")"
# A task slow on every call (60 ms, under the cut) is still timed and rejected by the window.
[[ $(checks_of "$scratch/out.jsonl" slow) == eager_time ]] || fail "slow: $(checks_of "$scratch/out.jsonl" slow)"
echo "ok"
