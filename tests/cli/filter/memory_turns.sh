#!/usr/bin/env bash
# The job's memory lines: while torch.compile works on the CPU the job says "compiling", the filter
# lends the task's memory beyond its inputs and first output to other tasks, and at "compiled" it
# takes it back and answers "go" before the compiled graph may run. torch 1.13 (CI) has no
# torch.compile, so a harness wrapper says the lines as Dynamo's callbacks would, then waits for
# "go" (and fails the job without it) before the real job runs; the task must be kept, and the
# wait recorded.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"
"$records" good >"$scratch/in.jsonl"
wrap_filter_task <<'PY'
import os, runpy, sys
if "--memory-turns" not in sys.argv:
    sys.stderr.write("the filter did not ask for memory turns\n")
    os._exit(9)
os.write(3, b"compiling\n")
os.write(3, b"compiled\n")
if sys.stdin.readline().strip() != "go":
    sys.stderr.write("no go after compiled\n")
    os._exit(9)
sys.argv[0] = os.path.join(os.path.dirname(__file__), "real_filter_task.py")
runpy.run_path(sys.argv[0], run_name="__main__")
PY
CUDAAGENT_SHARE_DIR=$scratch/share "$filter" --device cpu --window-ms 0.0001,25 --jobs 1 --timeout 60 \
  --allow-unsandboxed --no-sandbox -o "$scratch/out.jsonl" "$scratch/in.jsonl" 2>"$scratch/err" ||
  fail "exit $?: $(tail -3 "$scratch/err")"
jq -e '.filter.kept and .filter.seconds.grow_wait >= 0 and .filter.eager_ms.runs == 10' "$scratch/out.jsonl" >/dev/null ||
  fail "the job's memory lines were not answered: $(jq -c .filter "$scratch/out.jsonl")"
echo "ok: $(jq -c '.filter.seconds | {check, grow_wait}' "$scratch/out.jsonl")"
