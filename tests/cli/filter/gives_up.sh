#!/usr/bin/env bash
# A harness that fails every task for a reason outside the tasks (here: it exits before writing its
# report, as when torch cannot start the GPU) does not turn the whole input into error records: after
# max(8, 2 × --jobs) such failures in a row the run stops, exit 1, with the reason, and the tasks not
# yet run get no record at all (a re-run does them). A working harness afterwards filters them.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"
root=$(cd "$(dirname "$0")/../../.." && pwd)
for i in $(seq 1 30); do "$records" good | jq -c --arg id "task-$i" '.id = $id'; done >"$scratch/in.jsonl"

cp -r "$root/share" "$scratch/share"
printf 'import sys\nsys.exit("the device would not start")\n' >"$scratch/share/harness/filter_task.py"
status=0
CUDAAGENT_SHARE_DIR=$scratch/share "$filter" --device cpu --window-ms 0.0001,25 --jobs 2 \
  -o "$scratch/out.jsonl" "$scratch/in.jsonl" 2>"$scratch/err" || status=$?
[[ $status == 1 ]] || fail "a broken harness: exit $status, expected 1: $(tail -3 "$scratch/err")"
grep -q "gave up after 8 tasks in a row could not be filtered" "$scratch/err" ||
  fail "no give-up message: $(tail -3 "$scratch/err")"
[[ ! -e $scratch/out.jsonl && -f $scratch/out.jsonl.partial ]] || fail "-o was committed, or nothing kept"
errors=$(jq -r 'select(.error) | .error.id' "$scratch/out.jsonl.partial" | wc -l)
written=$(wc -l <"$scratch/out.jsonl.partial")
echo "broken harness: $errors error records of 30 tasks, $written records written"
((errors >= 8 && errors < 30 && written == errors)) || fail "expected 8 to 29 error records and nothing else: $(cat "$scratch/out.jsonl.partial")"

# The same input with the real harness: every task is filtered.
"$filter" --device cpu --window-ms 0.0001,25 --jobs 2 -o "$scratch/out.jsonl" "$scratch/in.jsonl" 2>"$scratch/err" ||
  fail "the real harness: exit $?: $(tail -3 "$scratch/err")"
[[ $(jq -r 'select(.filter.kept == true) | .id' "$scratch/out.jsonl" | wc -l) == 30 ]] ||
  fail "the real harness did not keep all 30: $(tail -3 "$scratch/err")"
echo "ok"
