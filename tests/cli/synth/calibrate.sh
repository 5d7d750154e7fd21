#!/usr/bin/env bash
# bench/calibrate_synth.py recovers a device model from measured eager times: synth's tasks (their
# per-operator costs in task.meta.costs) with times made from a known model plus 5% noise, as if
# cudaagent-filter had measured them; the fit lands near the known throughputs and its estimates
# follow the measurements better than synth's defaults do.
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
python=
for candidate in python3 /usr/bin/python3; do
  "$candidate" -c 'import numpy' 2>/dev/null && { python=$candidate; break; }
done
[[ -n $python ]] || fail "no Python with numpy"
"$bin/cudaagent-synth" -q -n 300 --seed 7 >"$scratch/tasks.jsonl" || fail "synth exited $?"
"$python" - "$root/bench" "$scratch/tasks.jsonl" "$scratch/filtered.jsonl" <<'PY' || fail "making the measurements"
import json, random, sys
sys.path.insert(0, sys.argv[1])
import calibrate_synth
truth = {"launch_us": 8.0, "fp32_tflops": 30.0, "conv_tflops": 80.0, "bandwidth_tbs": 3.0}
noise = random.Random(1)
with open(sys.argv[2]) as tasks, open(sys.argv[3], "w") as out:
    for line in tasks:
        record = json.loads(line)
        ms = calibrate_synth.estimate(record["task"]["meta"]["costs"], truth) * noise.lognormvariate(0, 0.05)
        record["filter"] = {"kept": True, "eager_ms": {"median": ms, "runs": 20}}
        out.write(json.dumps(record) + "\n")
PY
"$python" "$root/bench/calibrate_synth.py" "$scratch/filtered.jsonl" --json "$scratch/fit.json" >"$scratch/out" ||
  fail "calibrate_synth exited $?"
grep -q "synth flags of the fitted model: --launch-us" "$scratch/out" || fail "no flags: $(cat "$scratch/out")"
near() { jq -e --argjson want "$2" --argjson tol "$3" ".fitted.$1 / \$want - 1 | fabs < \$tol" "$scratch/fit.json" >/dev/null ||
  fail "$1: $(jq .fitted.$1 "$scratch/fit.json"), the model's is $2"; }
near bandwidth_tbs 3.0 0.1
near fp32_tflops 30.0 0.1
near conv_tflops 80.0 0.15
jq -e '.after.median_abs_log_error < .before.median_abs_log_error and .after.median_abs_log_error < 0.08' \
  "$scratch/fit.json" >/dev/null || fail "the fit does not follow the measurements: $(jq -c '{before, after}' "$scratch/fit.json")"
# Too few tasks with both numbers: a message and exit 1, no table.
head -3 "$scratch/filtered.jsonl" >"$scratch/few.jsonl"
code=0
"$python" "$root/bench/calibrate_synth.py" "$scratch/few.jsonl" >/dev/null 2>"$scratch/err" || code=$?
[[ $code == 1 ]] && grep -q "8 or more are needed" "$scratch/err" || fail "few tasks: exit $code, $(cat "$scratch/err")"
echo "ok"
