#!/usr/bin/env bash
# A task that runs out of memory only while other tasks' jobs share its device is run once more
# with the device to itself, and that run decides: the record is kept, and says why it was rerun
# (filter.first_run_shared). Proven with a harness wrapper (unsandboxed, so that jobs can see each
# other) that fails with an out-of-memory error when another job is running beside it: the first
# runs of two tasks started together (each waits up to a minute for the other) fail so, and the
# second runs, which must have the device alone, fail if any other job is running.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"
"$records" good | jq -c '.id = "task-1"' >"$scratch/in.jsonl"
"$records" good | jq -c '.id = "task-2" | .task.model_py += "\n# another task\n"' >>"$scratch/in.jsonl"

marks=$scratch/marks
mkdir -m 0777 "$marks"
wrap_filter_task <<PY
import glob, hashlib, os, runpy, sys, time
marks = "$marks"
mine = os.path.join(marks, str(os.getpid()))
open(mine, "w").close()
task = sys.argv[sys.argv.index("--task") + 1]
seen = os.path.join(marks, "seen-" + hashlib.sha256(open(task, "rb").read()).hexdigest())
first_run = not os.path.exists(seen)
open(seen, "w").close()

def alive(path):
    try:
        os.kill(int(os.path.basename(path)), 0)
        return True
    except (OSError, ValueError):
        return False

# A task's first run waits (up to a minute) for another job to be running; its second run only
# looks once: any other live job then means the device was not its own.
crowded = False
deadline = time.monotonic() + (60 if first_run else 0)
while not crowded:
    crowded = any(alive(p) for p in glob.glob(marks + "/[0-9]*") if p != mine)
    if time.monotonic() >= deadline:
        break
    time.sleep(0.1)
if crowded:
    import torch
    def out_of_memory(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory (a crowded device, in this test)") \
            if hasattr(torch.cuda, "OutOfMemoryError") else MemoryError("out of memory (crowded)")
    torch.nn.Module.__call__ = out_of_memory
sys.argv[0] = os.path.join(os.path.dirname(__file__), "real_filter_task.py")
runpy.run_path(sys.argv[0], run_name="__main__")
PY
CUDAAGENT_SHARE_DIR=$scratch/share "$filter" --device cpu --window-ms 0.0001,25 --jobs 2 \
  --allow-unsandboxed --no-sandbox -o "$scratch/out.jsonl" "$scratch/in.jsonl" 2>"$scratch/err" ||
  fail "exit $?: $(tail -3 "$scratch/err")"
jq -c '{id, kept: .filter.kept, reasons: .filter.reasons, first: .filter.first_run_shared}' "$scratch/out.jsonl"
[[ $(jq -r 'select(.filter.kept == true) | .id' "$scratch/out.jsonl" | wc -l) == 2 ]] ||
  fail "a task was rejected: $(jq -c '.filter.reasons' "$scratch/out.jsonl")"
[[ $(jq -r 'select(.filter.first_run_shared[0].check == "memory") | .id' "$scratch/out.jsonl" | wc -l) == 2 ]] ||
  fail "the first runs were not both memory failures beside each other: $(cat "$scratch/out.jsonl")"
echo "ok"
