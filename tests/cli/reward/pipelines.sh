#!/usr/bin/env bash
# Issue 16 through cudaagent-reward (the quickest stage): a file that is not JSON Lines exits 1
# with a message; inside a Slurm array task the stage that reads a file shards and one fed by a
# pipe does not, so a pipeline splits the work once and every record lands in exactly one task;
# a batch log gets progress lines, a terminal one status line that never shares a line with a
# record; SIGTERM keeps -o as FILE.partial; stores of shards merge into one, twice harmlessly.
source "$(dirname "$0")/../lib.sh"
bin=$1
reward=$bin/cudaagent-reward

# 1. Not JSON Lines at all: exit 1 and say so; a few bad lines among records are error records.
seq 1 50 | sed 's/^/plain text line /' >"$scratch/text.txt"
code=0
"$reward" "$scratch/text.txt" >"$scratch/out" 2>"$scratch/err" || code=$?
[[ $code == 1 ]] || fail "a text file: exit $code, expected 1"
grep -q "is not JSON Lines" "$scratch/err" || fail "a text file: no message: $(cat "$scratch/err")"
head -c 3000 /bin/sh >"$scratch/binary"
code=0
"$reward" "$scratch/binary" >/dev/null 2>"$scratch/err" || code=$?
[[ $code == 1 ]] && grep -q "is not JSON Lines" "$scratch/err" || fail "a binary file: exit $code: $(cat "$scratch/err")"
{ echo "id,value"; make_records 3; } >"$scratch/header.jsonl"
"$reward" --quiet "$scratch/header.jsonl" >"$scratch/out" || fail "one bad line among records failed the run"
[[ $(jq -s 'map(select(.error)) | length' "$scratch/out") == 1 ]] || fail "the bad line is not an error record"

# 2. Shard once. Three array tasks; the file reader shards, the pipe reader takes all it is given.
make_records 30 >"$scratch/in.jsonl"
for task in 0 1 2; do
  SLURM_ARRAY_TASK_ID=$task SLURM_ARRAY_TASK_COUNT=3 "$reward" "$scratch/in.jsonl" 2>"$scratch/first-$task.err" |
    SLURM_ARRAY_TASK_ID=$task SLURM_ARRAY_TASK_COUNT=3 "$reward" >"$scratch/shard-$task.jsonl" 2>"$scratch/second-$task.err" ||
    fail "array task $task failed"
  grep -q "shard $task/3 (from SLURM_ARRAY_TASK_ID)" "$scratch/first-$task.err" || fail "the file reader did not shard"
  grep -q "20 records left to the other shards" "$scratch/first-$task.err" || fail "the records left out were not counted: $(cat "$scratch/first-$task.err")"
  grep -q "input is a stream" "$scratch/second-$task.err" || fail "the pipe reader sharded again: $(cat "$scratch/second-$task.err")"
  [[ $(wc -l <"$scratch/shard-$task.jsonl") == 10 ]] || fail "array task $task wrote $(wc -l <"$scratch/shard-$task.jsonl") records, expected 10"
done
cat "$scratch"/shard-*.jsonl | jq -r .id | sort >"$scratch/got"
jq -r .id "$scratch/in.jsonl" | sort >"$scratch/expected"
cmp -s "$scratch/got" "$scratch/expected" || fail "the shards do not hold every record exactly once"
# Explicitly: --shard 0/1 marks a stage that must not shard.
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 "$reward" --quiet --shard 0/1 "$scratch/in.jsonl" >"$scratch/all" ||
  fail "--shard 0/1 failed"
[[ $(wc -l <"$scratch/all") == 30 ]] || fail "--shard 0/1 still sharded"

# 3. Progress in a batch log: a line every --progress-every seconds while records trickle in.
mkfifo "$scratch/slow"
(for i in 1 2 3 4 5; do make_records 1 | sed "s/\"r0\"/\"slow$i\"/"; sleep 0.4; done) >"$scratch/slow" &
"$reward" --progress-every 0.2 "$scratch/slow" >"$scratch/slow.out" 2>"$scratch/slow.err" || fail "slow input failed"
wait
grep -q "progress: [0-9]* records, " "$scratch/slow.err" || fail "no progress line in the log: $(cat "$scratch/slow.err")"
grep -q progress "$scratch/slow.out" && fail "progress went to stdout"
"$reward" --quiet --progress-every 0.2 "$scratch/in.jsonl" 2>"$scratch/quiet.err" >/dev/null
[[ ! -s $scratch/quiet.err ]] || fail "--quiet printed: $(cat "$scratch/quiet.err")"

# 4. On a terminal (script(1) gives it one), records and the status line share the screen without
# ever sharing a line: every line with a record is the record alone once the line is cleared.
if command -v script >/dev/null; then
  (for i in 1 2 3 4 5 6; do make_records 1 | sed "s/\"r0\"/\"tty$i\"/"; sleep 0.4; done) >"$scratch/tty.in"
  mkfifo "$scratch/tty.fifo"
  (while IFS= read -r line; do printf '%s\n' "$line"; sleep 0.4; done <"$scratch/tty.in") >"$scratch/tty.fifo" &
  script -qec "'$reward' '$scratch/tty.fifo'" /dev/null >"$scratch/typescript" </dev/null || fail "under script: exit $?"
  wait
  python3 - "$scratch/typescript" <<'PY' || fail "the terminal output mixes records and status: $(cat -v "$scratch/typescript")"
import json, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
records = status = 0
for line in text.replace("\r\n", "\n").split("\n"):
    shown = line.split("\r")[-1]        # what stays on the line after every carriage return
    shown = shown.replace("\x1b[K", "")
    if '"id"' in line:
        json.loads(shown)               # the record alone, whole
        records += 1
    if "records," in line:
        status += 1
assert records == 6, records
assert status >= 1, "no status line was drawn"
PY
fi

# 5. SIGTERM: what was written is kept as FILE.partial, and FILE never appears.
mkfifo "$scratch/endless"
(make_records 2000; sleep 600) >"$scratch/endless" &
feeder=$!
"$reward" --quiet -o "$scratch/stopped.jsonl" "$scratch/endless" 2>"$scratch/stop.err" &
pid=$!
for _ in $(seq 100); do [[ -n $(ls "$scratch" | grep 'stopped.jsonl.tmp') ]] && break; sleep 0.1; done
sleep 1
kill -TERM "$pid"
code=0
wait "$pid" || code=$?
kill "$feeder" 2>/dev/null || true
[[ $code == 143 ]] || fail "SIGTERM: exit $code"
[[ ! -e $scratch/stopped.jsonl ]] || fail "a stopped run left stopped.jsonl"
[[ $(wc -l <"$scratch/stopped.jsonl.partial") == 2000 ]] || fail "stopped.jsonl.partial: $(wc -l <"$scratch/stopped.jsonl.partial") records"
jq -e .reward "$scratch/stopped.jsonl.partial" >/dev/null || fail "a torn record in the partial file"
grep -q "stopped by signal 15 (SIGTERM)" "$scratch/stop.err" || fail "no message about the stop: $(cat "$scratch/stop.err")"

# 6. Stores of shards merge into one; merging again adds nothing.
for task in 0 1; do
  "$reward" --quiet --shard "$task/2" --db "$scratch/store-$task.db" "$scratch/in.jsonl" >/dev/null || fail "shard $task"
done
"$reward" --db "$scratch/all.db" --merge "$scratch/store-0.db" "$scratch/store-1.db" 2>"$scratch/merge.err" || fail "merge: $(cat "$scratch/merge.err")"
[[ $(sqlite3 "$scratch/all.db" "SELECT count(*) FROM results WHERE stage = 'reward'") == 30 ]] || fail "merged store: $(cat "$scratch/merge.err")"
grep -q "merged '$scratch/store-0.db': 15 of 15 results new (reward 15/15)" "$scratch/merge.err" || fail "merge message: $(cat "$scratch/merge.err")"
"$reward" --db "$scratch/all.db" --merge "$scratch/store-0.db" 2>"$scratch/merge2.err" || fail "second merge"
grep -q ": 0 of 15 results new" "$scratch/merge2.err" || fail "a second merge added rows: $(cat "$scratch/merge2.err")"
"$reward" --quiet --db "$scratch/all.db" "$scratch/in.jsonl" >/dev/null || fail "scoring from the merged store"
[[ $(sqlite3 "$scratch/all.db" "SELECT count(*) FROM results") == 30 ]] || fail "scoring again from the merged store added rows"
code=0
"$reward" --merge "$scratch/store-0.db" 2>/dev/null || code=$?
[[ $code == 2 ]] || fail "--merge without --db: exit $code, expected 2"
echo "ok"
