#!/usr/bin/env bash
# A closed downstream pipe ends the run quietly (exit 141, nothing on stderr); SIGTERM mid-run
# ends it with 128+15 after flushing complete records only; -o writes nothing under the real
# name when the run fails.
source "$(dirname "$0")/../lib.sh"
bin=$1
make_records 50000 >"$scratch/in.jsonl"

set +o pipefail
"$bin/cudaagent-reward" "$scratch/in.jsonl" 2>"$scratch/err" | head -n 1 >"$scratch/first"
codes=("${PIPESTATUS[@]}")
set -o pipefail
[[ ${codes[0]} == 141 ]] || fail "closed pipe: exit ${codes[0]}, expected 141"
[[ ! -s $scratch/err ]] || fail "closed pipe: stderr not quiet: $(cat "$scratch/err")"
jq -e '.reward.value' "$scratch/first" >/dev/null || fail "closed pipe: first record unreadable"

# SIGTERM while reading from a pipe that never ends: the stage must stop and flush.
mkfifo "$scratch/fifo"
(cat "$scratch/in.jsonl"; sleep 30) >"$scratch/fifo" &
feeder=$!
"$bin/cudaagent-reward" --quiet "$scratch/fifo" >"$scratch/partial" &
stage=$!
sleep 1
kill -TERM "$stage"
code=0
wait "$stage" || code=$?
kill "$feeder" 2>/dev/null || true
[[ $code == 143 ]] || fail "SIGTERM: exit $code, expected 143"
lines=$(wc -l <"$scratch/partial")
((lines > 0)) || fail "SIGTERM: no records were flushed"
# Every line is a complete record (jq fails on a torn one).
jq -e '.reward.value' "$scratch/partial" >/dev/null || fail "SIGTERM: a torn record was written"
[[ $(tail -c 1 "$scratch/partial" | od -An -c | tr -d ' ') == '\n' ]] || fail "SIGTERM: output ends mid-line"

# -o is atomic: a failed run (too many bad lines) leaves no file under the real name.
printf 'bad\nbad\n' >"$scratch/bad.jsonl"
code=0
"$bin/cudaagent-reward" --quiet --max-bad-lines 0 -o "$scratch/out.jsonl" "$scratch/bad.jsonl" 2>/dev/null || code=$?
[[ $code == 1 ]] || fail "bad lines: exit $code, expected 1"
[[ ! -e $scratch/out.jsonl ]] || fail "a failed run left $scratch/out.jsonl"
ls "$scratch" | grep -q '\.tmp\.' && fail "a failed run left a temporary file"

# A device as -o is written in place, never replaced (a FIFO stands in for /dev/null).
mkfifo "$scratch/device"
cat "$scratch/device" >"$scratch/from-device" &
reader=$!
"$bin/cudaagent-reward" --quiet -o "$scratch/device" "$scratch/in.jsonl" || fail "-o FIFO failed"
wait "$reader"
[[ -p $scratch/device ]] || fail "-o replaced the FIFO with a regular file"
[[ $(wc -l <"$scratch/from-device") == 50000 ]] || fail "-o FIFO: records lost"
echo "ok"
