#!/usr/bin/env bash
# The device's timing slot is given back when the task's job says its timed calls are over, not
# when its process has ended: on a GPU the end (gigabytes of device memory freed, the CUDA context
# destroyed) takes seconds that no other task's timing should wait for. Proven with a harness
# wrapper (unsandboxed) whose process lingers 5 s after the real job is done: that time counts in
# the task's time after its checks, never in its slot.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"
"$records" good >"$scratch/in.jsonl"
wrap_filter_task <<'PY'
import os, runpy, sys, time
real_exit = os._exit
def slow_exit(status):
    time.sleep(5)
    real_exit(status)
os._exit = slow_exit
sys.argv[0] = os.path.join(os.path.dirname(__file__), "real_filter_task.py")
runpy.run_path(sys.argv[0], run_name="__main__")
PY
CUDAAGENT_SHARE_DIR=$scratch/share "$filter" --device cpu --window-ms 0.0001,25 --jobs 1 \
  --allow-unsandboxed --no-sandbox -o "$scratch/out.jsonl" "$scratch/in.jsonl" 2>"$scratch/err" ||
  fail "exit $?: $(tail -3 "$scratch/err")"
seconds=$(jq -c '.filter.seconds' "$scratch/out.jsonl")
echo "seconds: $seconds"
[[ $(jq -r '.filter.kept' "$scratch/out.jsonl") == true ]] || fail "good was rejected: $(jq -c .filter.reasons "$scratch/out.jsonl")"
jq -e '.filter.seconds | .time >= 5 and .slot < .time - 4.5' "$scratch/out.jsonl" >/dev/null ||
  fail "the slot was held while the job's process ended: $seconds"
echo "ok"
