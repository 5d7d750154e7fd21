#!/usr/bin/env bash
# --db: results are stored by task hash, so a re-run is answered from the store without running
# any task. Proven with a harness that would fail if it ran; a changed setting misses the store
# (and the failing harness then gives error records, which are not stored); --kept-only works on
# stored results too.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"
root=$(cd "$(dirname "$0")/../../.." && pwd)
db=$scratch/store.db
"$records" good syntax_error >"$scratch/in.jsonl"
echo '{"id":"no-task"}' >>"$scratch/in.jsonl"
args=(--device cpu --window-ms 0.0001,25 --db "$db" "$scratch/in.jsonl")

start=$SECONDS
"$filter" "${args[@]}" >"$scratch/first" 2>"$scratch/err" || fail "first run exited $?: $(cat "$scratch/err")"
echo "first run: $((SECONDS - start)) s"
[[ $(kept_of "$scratch/first" good) == true && $(checks_of "$scratch/first" syntax_error) == load ]] ||
  fail "first run: $(cat "$scratch/first")"
rows=$(sqlite3 "$db" "SELECT count(*) FROM results WHERE stage = 'filter'")
[[ $rows == 2 ]] || fail "the store holds $rows filter results, expected 2"

# A share directory whose filter harness fails at once: any task that runs now is an error.
cp -r "$root/share" "$scratch/share"
printf 'import sys\nsys.exit("poisoned harness ran")\n' >"$scratch/share/harness/filter_task.py"
export CUDAAGENT_SHARE_DIR=$scratch/share

start=$SECONDS
"$filter" "${args[@]}" >"$scratch/second" 2>"$scratch/err" || fail "second run exited $?: $(cat "$scratch/err")"
echo "second run (from the store): $((SECONDS - start)) s"
diff "$scratch/first" "$scratch/second" || fail "the second run's records differ from the first's"
grep -q "2 from the store" "$scratch/err" || fail "the summary does not say 2 from the store: $(cat "$scratch/err")"

"$filter" "${args[@]}" --kept-only >"$scratch/kept" 2>"$scratch/err" || fail "--kept-only exited $?"
[[ $(jq -r '.id // "error"' "$scratch/kept" | tr '\n' ' ') == "good error " ]] ||
  fail "--kept-only wrote: $(jq -c '.id // .error.reason' "$scratch/kept")"

# Another seed is another key: the tasks run, meet the failing harness, and become error records
# that are not stored.
"$filter" "${args[@]}" --seed 1 >"$scratch/third" 2>"$scratch/err" || fail "third run exited $?"
errors=$(jq -r 'select(.error.reason // "" | startswith("could not filter the task (retry)")) | .error.id' "$scratch/third" | tr '\n' ' ')
[[ $errors == "good syntax_error " ]] || fail "--seed 1 did not miss the store: $(cat "$scratch/third")"
rows=$(sqlite3 "$db" "SELECT count(*) FROM results WHERE stage = 'filter'")
[[ $rows == 2 ]] || fail "error records were stored ($rows rows)"
echo "ok"
