#!/usr/bin/env bash
# cudaagent-rollout's benchmarks (issue 12): tool overhead per call (rollout_tools_bench), and N
# concurrent scripted episodes on the CPU example against the scripted server (default 64 at once):
# every episode reads the task, writes kernel, binding and a model_new.py of its own, greps, edits,
# compiles, verifies and stops, and is then scored (verify + profile + reward). Reports records,
# error records, wall time, evaluation calls per episode and their latency, tool time per call.
# Usage: bench/run_rollout_bench.sh [BIN_DIR] [EPISODES] [JOBS] [EVAL_SLOTS]
#   defaults: build/release/bin 64 64 1; KEEP_OUT=FILE keeps the trajectories
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
episodes=${2:-64}
jobs=${3:-64}
slots=${4:-1}
work=$(mktemp -d)
server_pid=
trap '[[ -n $server_pid ]] && kill $server_pid 2>/dev/null; rm -rf "$work"' EXIT
example=$here/share/examples/workspaces/bias-relu-cpu

echo "== tool overhead (200 calls each)"
"$bin/rollout_tools_bench" 200

python3 - "$example" "$work/bench.jsonl" <<'P'
import json, os, sys
ex, out = sys.argv[1:3]
read = lambda n: open(os.path.join(ex, n)).read()
call = lambda name, **a: {"name": name, "arguments": a}
model_new = read("model_new.py") + "\n# episode @EPISODE@\n"  # distinct content: no shared result
lines = [
    {"content": "", "tool_calls": [call("Read", file_path="model.py"), call("Glob", pattern="**/*")]},
    {"content": "", "tool_calls": [
        call("Write", file_path="kernels/bias_relu.cpp", content=read("kernels/bias_relu.cpp")),
        call("Write", file_path="kernels/bias_relu_binding.cpp", content=read("kernels/bias_relu_binding.cpp")),
        call("Write", file_path="model_new.py", content=model_new)]},
    {"content": "", "tool_calls": [call("Grep", pattern="bias", output_mode="content"),
                                   call("Edit", file_path="model_new.py", old_string="# episode", new_string="# run of episode")]},
    {"content": "", "tool_calls": [call("Bash", command="bash utils/compile.sh")]},
    {"content": "", "tool_calls": [call("Bash", command="python3 -m utils.verification")]},
    {"content": "done"},
]
open(out, "w").write("".join(json.dumps(l) + "\n" for l in lines))
P
python3 "$here/share/scripted-model/scripted_server.py" "$work/bench.jsonl" "$work/port" "$work/requests.log" &
server_pid=$!
for _ in $(seq 200); do [[ -s $work/port ]] && break; sleep 0.05; done
echo "== $episodes scripted episodes, $jobs at once, $slots evaluation slot(s)"
start=$(date +%s.%N)
"$bin/cudaagent-rollout" --device cpu --endpoint "http://127.0.0.1:$(cat "$work/port")" --model scripted \
  --episodes-per-task "$episodes" --jobs "$jobs" --eval-slots "$slots" --quiet --work-dir "$work" \
  "$example/model.py" >"$work/out.jsonl" 2>"$work/err" || { echo "exit $?"; tail "$work/err"; exit 1; }
end=$(date +%s.%N)
[[ -n ${KEEP_OUT:-} ]] && cp "$work/out.jsonl" "$KEEP_OUT"
python3 - "$work/out.jsonl" "$start" "$end" <<'P'
import json, statistics as st, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
traj = [r for r in recs if "trajectory" in r]
errors = [r for r in recs if "error" in r]
def q(xs, p): xs = sorted(xs); return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")
evals = [e for r in traj for e in r["trajectory"]["evaluations"]]
calls = [c for r in traj for t in r["trajectory"]["turns"] for c in t["calls"]]
print("records %d, error records %d, distinct ids %d, wall %.1f s" % (len(traj), len(errors),
      len({r["id"] for r in traj}), float(sys.argv[3]) - float(sys.argv[2])))
print("verdicts:", {v: sum(1 for r in traj if r["verify"]["verdict"] == v) for v in {r["verify"]["verdict"] for r in traj}},
      "rewards:", sorted({r["reward"]["value"] for r in traj if r.get("reward")}))
print("token status:", {s: sum(1 for r in traj if r["trajectory"]["tokens"]["status"] == s) for s in {r["trajectory"]["tokens"]["status"] for r in traj}})
for op in ("compile", "verify"):
    xs = [e["seconds"] for e in evals if e["op"] == op]
    print("%-8s %3d calls (%.1f per episode)  median %.2f s  p90 %.2f s  max %.2f s" % (op, len(xs),
          len(xs) / max(len(traj), 1), q(xs, .5), q(xs, .9), max(xs) if xs else float("nan")))
print("final score per episode: median %.2f s, max %.2f s" % (q([r["trajectory"]["seconds"]["final_score"] for r in traj], .5),
      max(r["trajectory"]["seconds"]["final_score"] for r in traj)))
for name in ("Read", "Write", "Edit", "Grep", "Glob"):
    xs = [c["seconds"] * 1000 for c in calls if c["name"] == name]
    print("%-6s %4d calls in episodes: median %.2f ms, p90 %.2f ms" % (name, len(xs), q(xs, .5), q(xs, .9)))
P
