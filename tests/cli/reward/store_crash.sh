#!/usr/bin/env bash
# --db: a reward is committed before its record is released. SIGKILL the stage mid-run several
# times, then run it to the end: the store holds each record's reward exactly once, every record
# that reached stdout before a kill is in the store, and a re-run takes rewards from the store.
source "$(dirname "$0")/../lib.sh"
bin=$1
n=20000
make_records "$n" >"$scratch/in.jsonl"
db=$scratch/store.db
for attempt in 1 2 3 4; do
  "$bin/cudaagent-reward" --quiet --db "$db" "$scratch/in.jsonl" >"$scratch/released-$attempt" &
  pid=$!
  sleep "0.$((RANDOM % 8 + 2))"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
done
"$bin/cudaagent-reward" --quiet --db "$db" "$scratch/in.jsonl" >"$scratch/final" || fail "final run failed"
[[ $(wc -l <"$scratch/final") == "$n" ]] || fail "final run did not write $n records"
[[ $(sqlite3 "$db" "PRAGMA quick_check") == ok ]] || fail "quick_check failed"
rows=$(sqlite3 "$db" "SELECT count(*) FROM results WHERE stage = 'reward'")
[[ $rows == "$n" ]] || fail "store has $rows rewards, expected $n"
distinct=$(sqlite3 "$db" "SELECT count(DISTINCT job_key) FROM results")
[[ $distinct == "$rows" ]] || fail "duplicate job keys"
# Every id released before a kill (complete lines only) has its reward in the store.
cat "$scratch"/released-* | jq -R -r 'fromjson? | .id' | sort -u >"$scratch/released-ids"
sqlite3 "$db" "SELECT record_id FROM results" | sort -u >"$scratch/stored-ids"
missing=$(comm -23 "$scratch/released-ids" "$scratch/stored-ids" | wc -l)
[[ $missing == 0 ]] || fail "$missing released records have no stored reward"
echo "released before kills: $(wc -l <"$scratch/released-ids") records"
# A re-run adds nothing and gives the same output.
"$bin/cudaagent-reward" --quiet --db "$db" "$scratch/in.jsonl" >"$scratch/again"
cmp -s "$scratch/final" "$scratch/again" || fail "re-run output differs"
[[ $(sqlite3 "$db" "SELECT count(*) FROM results") == "$n" ]] || fail "re-run added rows"
# Different settings are a different key: a new margin scores afresh.
"$bin/cudaagent-reward" --quiet --db "$db" --margin 0.5 "$scratch/in.jsonl" >/dev/null
[[ $(sqlite3 "$db" "SELECT count(*) FROM results") == $((2 * n)) ]] || fail "new settings reused old rewards"
echo "ok"
