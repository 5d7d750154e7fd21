#!/usr/bin/env bash
# Tasks run in forked children of a warm harness worker: a task that times out costs its worker
# (killed with everything in its sandbox), and the next task on that thread gets a fresh worker
# and a fair run; tasks after that reuse the warm one.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"
"$records" good infinite_loop slow syntax_error >"$scratch/in.jsonl"
"$filter" --device cpu --window-ms 0.0001,25 --jobs 1 --timeout 5 "$scratch/in.jsonl" \
  >"$scratch/out.jsonl" 2>"$scratch/err" || fail "exit $?: $(cat "$scratch/err")"
[[ $(kept_of "$scratch/out.jsonl" good) == true ]] || fail "good: $(head -1 "$scratch/out.jsonl")"
[[ $(checks_of "$scratch/out.jsonl" infinite_loop) == timeout ]] || fail "infinite_loop was not timed out"
[[ $(checks_of "$scratch/out.jsonl" slow) == eager_time ]] || fail "slow after the timeout: $(checks_of "$scratch/out.jsonl" slow)"
[[ $(checks_of "$scratch/out.jsonl" syntax_error) == load ]] || fail "syntax_error after the timeout"
# Which tasks paid for a worker start: the first, and the first after the timeout.
starts=$(jq -r 'select(.filter.seconds.worker_start > 0) | .id' "$scratch/out.jsonl" | tr '\n' ' ')
[[ $starts == "good slow " ]] || fail "tasks that started a worker: '$starts', expected 'good slow '"
echo "ok"
