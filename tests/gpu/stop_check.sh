#!/usr/bin/env bash
# How long a stop takes on the device (issue 16): SIGTERM to
#   1. cudaagent-profile while it times a candidate that hangs only when timed (it passes verify,
#      then spins in Python from its 40th call on, holding the device);
#   2. cudaagent-filter while its timing job hangs (tests/filter/tasks/hangs_when_timed.py);
#   3. a second cudaagent-profile waiting for the device lock that the first one holds.
# Each run goes through tests/cli/reaper.py, which fails when it leaves a process behind. The
# summary gives the seconds from SIGTERM to exit; each must stop within STOP_LIMIT seconds
# (default 10; Slurm gives 30 before SIGKILL).
# Usage: tests/gpu/stop_check.sh BIN_DIR OUT_DIR      (DEVICE=cpu runs the same on the CPU example)
set -uo pipefail
bin=$1 out=$2
device=${DEVICE:-cuda}
limit=${STOP_LIMIT:-10}
root=$(cd "$(dirname "$0")/../.." && pwd)
reaper=$root/tests/cli/reaper.py
base=$root/share/examples/workspaces/bias-relu-$device
mkdir -p "$out"
export CUDAAGENT_CACHE_DIR=${CUDAAGENT_CACHE_DIR:-/tmp/cudaagent-gpu-cache}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary=$out/summary.md
log=$out/log.txt
: >"$summary"
failures=0
note() { echo "$*" | tee -a "$summary"; }

# run_and_stop NAME WAIT_FOR_PATTERN COMMAND...: starts COMMAND under the reaper with stderr in
# OUT/NAME.err, waits until that stderr matches the pattern (at most 900 s), lets it run
# $SETTLE seconds more (default 30: past the build and warm-up, into the hang), sends SIGTERM and
# prints "EXIT SECONDS".
run_and_stop() {
  local name=$1 pattern=$2
  shift 2
  "$reaper" "$work/$name.pid" "$@" >"$out/$name.jsonl" 2>"$out/$name.err" &
  local wrapper=$!
  for _ in $(seq 9000); do
    grep -q -- "$pattern" "$out/$name.err" 2>/dev/null && break
    kill -0 "$wrapper" 2>/dev/null || break
    sleep 0.1
  done
  sleep "${SETTLE:-30}"
  local start
  start=$(date +%s.%N)
  kill -TERM "$(cat "$work/$name.pid")" 2>/dev/null
  local code=0
  wait "$wrapper" || code=$?
  echo "$code $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')"
}

judge() {  # NAME EXIT SECONDS JUDGED
  local name=$1 code=$2 seconds=$3 judged=$4
  local verdict=PASS
  if [[ $code == 99 ]]; then
    verdict="FAIL (processes left behind: see $name.err)"
  elif [[ $code != 143 ]]; then
    verdict="FAIL (exit $code, expected 143)"
  elif [[ $judged == yes ]] && awk -v s="$seconds" -v l="$limit" 'BEGIN { exit !(s > l) }'; then
    verdict="FAIL (more than $limit s)"
  fi
  [[ $judged == yes && $verdict != PASS ]] && failures=$((failures + 1))
  note "- $name: exit $code, ${seconds} s from SIGTERM to exit: $verdict"
}

# A candidate that passes verify and hangs when timed.
cp -r "$base" "$work/hangs"
cat >"$work/hangs/model_new.py" <<'PY'
import torch
import torch.nn as nn

import cuda_extension

_calls = [0]


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        _calls[0] += 1
        while _calls[0] > 40:
            pass
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)
PY
jq -nc --rawfile m "$base/model.py" --arg w "$work/hangs" \
  '{id: "hangs", task: {model_py: $m}, candidate: {workspace: $w}}' |
  "$bin/cudaagent-verify" --quiet --device "$device" >"$work/verified.jsonl" 2>>"$log"
note "## stops on $device ($(date -u +%FT%TZ))"
if [[ $(jq -r .verify.verdict "$work/verified.jsonl") != PASS ]]; then
  note "- setup: the hanging candidate did not pass verify: $(jq -c .verify.reason "$work/verified.jsonl")"
  exit 1
fi

# 1. profile timing a candidate that hangs (--timeout 600: only the stop can end it soon).
read -r code seconds < <(run_and_stop profile "torch" "$bin/cudaagent-profile" --device "$device" \
  --timeout 600 "$work/verified.jsonl")
judge "profile, candidate hanging while timed" "$code" "$seconds" yes

# 2. filter whose timing job hangs.
jq -cRs '{id: "hangs_when_timed", task: {model_py: .}}' <"$root/tests/filter/tasks/hangs_when_timed.py" >"$work/task.jsonl"
read -r code seconds < <(run_and_stop filter "torch" "$bin/cudaagent-filter" --device "$device" \
  --window-ms 0.0001,100000 --timeout 600 "$work/task.jsonl")
judge "filter, timing job hanging" "$code" "$seconds" yes

# 3. a second profile waiting for the device lock the first holds. If the waiter has not stopped
# 20 s after its SIGTERM, the holder is stopped too, which frees the lock (and the waiter).
"$bin/cudaagent-profile" --quiet --device "$device" --timeout 600 "$work/verified.jsonl" >/dev/null 2>>"$log" &
holder=$!
sleep 30  # the holder is timing (and hanging) by now
"$reaper" "$work/waiter.pid" "$bin/cudaagent-profile" --device "$device" --timeout 600 \
  "$work/verified.jsonl" >"$out/waiter.jsonl" 2>"$out/waiter.err" &
waiter=$!
for _ in $(seq 3000); do
  grep -q "waiting for" "$out/waiter.err" 2>/dev/null && break
  kill -0 "$waiter" 2>/dev/null || break
  sleep 0.1
done
sleep 2
start=$(date +%s.%N)
kill -TERM "$(cat "$work/waiter.pid")" 2>/dev/null
for _ in $(seq 200); do kill -0 "$waiter" 2>/dev/null || break; sleep 0.1; done
freed=
if kill -0 "$waiter" 2>/dev/null; then
  freed=" (it was still waiting 20 s later; stopping the holder freed it)"
  kill -TERM "$holder" 2>/dev/null
fi
code=0
wait "$waiter" || code=$?
seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
judge "profile, waiting for the device lock$freed" "$code" "$seconds" yes
kill -TERM "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
note "failures: $failures"
((failures == 0))
