#!/usr/bin/env bash
# Inputs, ids, sharding and resuming: task records (other keys passed through, the id becomes the
# episode's) and model.py files; malformed lines as error records; --episodes-per-task; --shard
# splitting tasks; --db making a re-run write the stored records instead of running again; and a
# run stopped by SIGTERM keeping its finished episodes, which a resumed run does not repeat.
source "$(dirname "$0")/../lib.sh"
bin=$1
source "$(dirname "$0")/lib.bash"

sed 's/features = 512/features = 256/' "$task" >"$scratch/other.py"
jq -nc --rawfile m "$scratch/other.py" '{id: "task-b", task: {model_py: $m, source: "test"}, filter: {kept: true}}' >"$scratch/tasks.jsonl"
echo '{"id": "no-task"}' >>"$scratch/tasks.jsonl"
echo 'not json' >>"$scratch/tasks.jsonl"
run --policy "replay:$scratch/short.jsonl" --episodes-per-task 2 --jobs 2 --db "$scratch/store.db" "$task" "$scratch/tasks.jsonl"
[[ $code == 0 ]] || fail "first run: exit $code: $(cat "$scratch/err")"
grep '"trajectory"' "$scratch/out" | jq -c '[.trajectory.task_id, .trajectory.sample, .id]' | sort >"$scratch/first"
[[ $(wc -l <"$scratch/first") == 4 && $(cut -d, -f3 "$scratch/first" | sort -u | wc -l) == 4 ]] ||
  fail "expected 4 episodes with distinct ids: $(cat "$scratch/first")"
[[ $(grep -c '^{"error"' "$scratch/out") == 2 ]] || fail "expected 2 error records"
grep '^{"error"' "$scratch/out" | grep -q "no task.model_py" || fail "the record without a task has no error record"
[[ $(grep '"task_id":"task-b"' "$scratch/out" | jq -r '.filter.kept' | sort -u) == true ]] || fail "keys were not passed through"
[[ $(grep -c '"task_id":"task-b"' "$scratch/out") == 2 ]] || fail "task-b should have 2 episodes"

run --policy "replay:$scratch/short.jsonl" --episodes-per-task 2 --db "$scratch/store.db" "$task" "$scratch/tasks.jsonl"
[[ $code == 0 ]] || fail "resume: exit $code"
grep -q "4 episodes (4 already in the store)" "$scratch/err" || fail "resume: $(cat "$scratch/err")"
grep '"trajectory"' "$scratch/out" | jq -c '[.trajectory.task_id, .trajectory.sample, .id]' | sort >"$scratch/second"
cmp -s "$scratch/first" "$scratch/second" || fail "resume: other records"

for shard in 0/2 1/2; do
  run --policy "replay:$scratch/short.jsonl" --shard "$shard" "$task" "$scratch/tasks.jsonl"
  grep '"trajectory"' "$scratch/out" | jq -r .trajectory.task_id >>"$scratch/sharded"
done
[[ $(sort "$scratch/sharded" | uniq -c | awk '{print $1}' | sort -u) == 1 && $(wc -l <"$scratch/sharded") == 2 ]] ||
  fail "shards overlap or miss tasks: $(cat "$scratch/sharded")"

# SIGTERM: finished episodes are kept (and stored), the one running is dropped, and a resumed run
# runs only what is missing.
start_server loop.jsonl --delay 0.2
"$rollout" --device cpu --work-dir "$scratch" --endpoint "$url" --model m --max-turns 4 --episodes-per-task 3 \
  --db "$scratch/stop.db" "$task" >"$scratch/stopped" 2>"$scratch/stopped.err" &
pid=$!
for _ in $(seq 600); do [[ -s $scratch/stopped ]] && break; sleep 0.1; done
kill -TERM "$pid"
code=0; wait "$pid" || code=$?
[[ $code == 143 ]] || fail "SIGTERM: exit $code: $(cat "$scratch/stopped.err")"
kept=$(wc -l <"$scratch/stopped")
(( kept >= 1 && kept < 3 )) || fail "SIGTERM: $kept records"
jq -e .trajectory <"$scratch/stopped" >/dev/null || fail "SIGTERM: a record is torn"
run --endpoint "$url" --model m --max-turns 4 --episodes-per-task 3 --db "$scratch/stop.db" "$task"
grep -q "3 episodes ($kept already in the store)" "$scratch/err" || fail "after SIGTERM: $(cat "$scratch/err")"
[[ $(wc -l <"$scratch/out") == 3 ]] || fail "after SIGTERM: $(wc -l <"$scratch/out") records"
echo "ok"
