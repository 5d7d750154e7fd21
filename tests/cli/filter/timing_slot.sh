#!/usr/bin/env bash
# The task's job builds the model and draws the inputs in its checks, before it takes the device's
# timing slot: a task whose input draw takes 1 s holds the slot only for its warm-up and timed
# calls. A job that hangs while it holds the slot times out (the slot is given back) and the next
# task gets a fresh worker and is kept.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"
"$records" slow_inputs hangs_when_timed good >"$scratch/in.jsonl"
"$filter" --device cpu --window-ms 0.0001,25 --jobs 1 --timeout 6 "$scratch/in.jsonl" \
  >"$scratch/out.jsonl" 2>"$scratch/err" || fail "exit $?: $(cat "$scratch/err")"
record() { jq -c --arg id "$1" 'select(.id == $id) | .filter' "$scratch/out.jsonl"; }
[[ $(kept_of "$scratch/out.jsonl" slow_inputs) == true ]] || fail "slow_inputs: $(record slow_inputs)"
# The checks ran over 1 s (the input draws), the slot was held for well under that.
jq -e -s '.[] | select(.id == "slow_inputs") | .filter.seconds | .check >= 1 and .slot > 0 and .slot < .check - 0.8' \
  "$scratch/out.jsonl" >/dev/null || fail "slow_inputs held the slot while drawing its inputs: $(record slow_inputs)"
if jq -e -s '.[] | select(.id == "hangs_when_timed") | .filter.compile | startswith("skipped")' "$scratch/out.jsonl" >/dev/null; then
  [[ $(checks_of "$scratch/out.jsonl" hangs_when_timed) == timeout ]] ||
    fail "hangs_when_timed: $(record hangs_when_timed)"
  jq -e -s '.[] | select(.id == "hangs_when_timed") | .filter.reasons[0].detail | contains("6.0 s in warmup")' \
    "$scratch/out.jsonl" >/dev/null || fail "hangs_when_timed: $(record hangs_when_timed)"
else  # torch.compile calls forward a fourth time in the check job: it hangs there instead
  [[ $(kept_of "$scratch/out.jsonl" hangs_when_timed) == false ]] || fail "hangs_when_timed was kept"
fi
[[ $(kept_of "$scratch/out.jsonl" good) == true ]] || fail "good after the timed-out timing job: $(record good)"
starts=$(jq -r 'select(.filter.seconds.worker_start > 0) | .id' "$scratch/out.jsonl" | tr '\n' ' ')
[[ $starts == "slow_inputs good " ]] || fail "tasks that started a worker: '$starts', expected 'slow_inputs good '"
echo "ok"
