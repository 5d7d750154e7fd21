#!/usr/bin/env bash
# Issue 16, on the slowest stage: the first filtered task reaches the next stage while the input
# is still open; `| head -1` ends the run (exit 141, quietly) though its input never ends; SIGTERM
# during a task that would run for ten minutes stops the run (exit 143), keeps the finished task
# as out.jsonl.partial and never as out.jsonl; neither run leaves a worker, sandbox or harness
# child behind.
# The bounds below (timeout 300) only keep a broken build from hanging CI; nothing is timed.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"

reaper=$(cd "$(dirname "$0")/.." && pwd)/reaper.py  # fails (99) when a run leaves a process behind

# 1. Streaming, and a reader that goes away: one task, an input that stays open. (Each run goes
# through reaper.py, which exits 99 when anything the run started outlives it.)
mkfifo "$scratch/in"
exec 3<>"$scratch/in"
"$records" good >&3
set +o pipefail
timeout 300 "$reaper" "$scratch/pid1" "$filter" --quiet --device cpu --window-ms 0.0001,1000 \
  --timeout 600 "$scratch/in" 2>"$scratch/err1" | timeout 300 head -n 1 >"$scratch/first"
codes=("${PIPESTATUS[@]}")
set -o pipefail
exec 3>&-
[[ $(jq -r .id "$scratch/first") == good ]] || fail "no record came through: $(cat "$scratch/first" "$scratch/err1")"
[[ ${codes[1]} == 0 ]] || fail "head did not get its line (exit ${codes[1]})"
[[ ${codes[0]} == 141 ]] || fail "the filter did not end when its reader went away: exit ${codes[0]}"
[[ ! -s $scratch/err1 ]] || fail "a closed pipe should end quietly: $(cat "$scratch/err1")"

# 2. SIGTERM while a task runs forever: the finished one is kept, the cut one is not written.
"$records" good infinite_loop >"$scratch/tasks.jsonl"
"$reaper" "$scratch/pid2" "$filter" --device cpu --window-ms 0.0001,1000 --timeout 600 --jobs 1 \
  -o "$scratch/out.jsonl" "$scratch/tasks.jsonl" 2>"$scratch/err2" &
reaper_pid=$!
for _ in $(seq 100); do [[ -s $scratch/pid2 ]] && break; sleep 0.1; done
pid=$(cat "$scratch/pid2")
for _ in $(seq 3000); do
  grep -q "'good': kept" "$scratch/err2" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "'good': kept" "$scratch/err2" || fail "the first task did not finish: $(cat "$scratch/err2")"
sleep 1  # the second task's job is under way (its exact phase does not matter)
kill -TERM "$pid"
code=0
timeout 300 tail --pid="$reaper_pid" -f /dev/null || fail "the filter did not stop within 300 s of SIGTERM"
wait "$reaper_pid" || code=$?
[[ $code == 143 ]] || fail "SIGTERM: exit $code, expected 143: $(cat "$scratch/err2")"
[[ ! -e $scratch/out.jsonl ]] || fail "a stopped run presented out.jsonl as complete"
[[ $(jq -r .id "$scratch/out.jsonl.partial") == good ]] || fail "out.jsonl.partial: $(cat "$scratch/out.jsonl.partial" 2>&1)"
ls "$scratch" | grep -q '\.tmp\.' && fail "a temporary file was left"
grep -q "stopped by signal 15 (SIGTERM)" "$scratch/err2" || fail "no message about the stop: $(cat "$scratch/err2")"
grep -q "out.jsonl.partial" "$scratch/err2" || fail "the message does not name the partial file"

echo "ok"
