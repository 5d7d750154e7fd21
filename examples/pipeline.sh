#!/usr/bin/env bash
# The main job on the bundled example, on the CPU. Data side: synthesise a few tiny tasks, filter
# them in the sandbox (eager only with Debian's torch 1.13, which has no torch.compile: each record
# says so), and dedup the kept ones against the example tasks. Scoring side: verify two candidates
# of the example CPU task, one honest and one that calls torch instead of its kernel, time the one
# that passes, score both, and summarise; then score the bundled verify/profile sample (one line is
# torn on purpose, to show an error record). On a GPU the same chain runs with --device cuda and the
# default 1-100 ms filter window.
#
# Everything it makes stays in OUT_DIR (default: build/quickstart), which it names at the end; a
# second run reuses its store, so the scoring is taken from it instead of being redone.
# Usage: examples/pipeline.sh [BIN_DIR [OUT_DIR]]   (default: build/release/bin, build/quickstart)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
out=${2:-$here/build/quickstart}
mkdir -p "$out"
out=$(cd "$out" && pwd)
examples=$here/share/examples

echo "== synth -> filter -> dedup: 8 tiny tasks (seed 1), run in the sandbox, then deduplicated" >&2
# Tiny CPU tasks run in microseconds: the window is widened from the GPU's 1-100 ms.
"$bin/cudaagent-synth" --quiet --seed 1 --count 8 --batch 2 --max-dim 16 -o "$out/synthesized.jsonl"
"$bin/cudaagent-filter" --quiet --device cpu --window-ms 0.001,1000 --jobs 2 --db "$out/store.db" \
  "$out/synthesized.jsonl" -o "$out/filtered.jsonl"
jq -c 'select(.filter.kept)' "$out/filtered.jsonl" |
  "$bin/cudaagent-dedup" --quiet --annotate --reference "examples=$examples/workspaces" -o "$out/tasks.jsonl"
printf '%-14s %-34s %-9s %-28s %s\n' id ops eager_ms filter dedup
jq -r --slurpfile deduped "$out/tasks.jsonl" '
  . as $t | ([$deduped[] | select(.id == $t.id)][0].dedup) as $d |
  [.id[0:12], (.task.ops | join(",")),
   (if .filter.eager_ms then (.filter.eager_ms.median * 1000 | floor / 1000 | tostring) else "-" end),
   (if .filter.kept then "kept" else "rejected: " + ([.filter.reasons[].check] | join(",")) end),
   (if $d then (if $d.kept then "kept" else "dropped" end) + " (nearest " +
      ($d.score * 100 | floor | tostring) + "%)" else "-" end)] | @tsv' "$out/filtered.jsonl" |
  while IFS=$'\t' read -r id ops ms filter dedup; do
    printf '%-14s %-34s %-9s %-28s %s\n' "$id" "$ops" "$ms" "$filter" "$dedup"
  done
echo "torch.compile check: $(jq -r .filter.compile "$out/filtered.jsonl" | sort -u | paste -sd ';')"
cat <<'TEXT'
  eager_ms: the task's median eager time on this CPU; kept: it runs in the sandbox, gives the same
  output twice and a different one for different inputs; dedup: its Python AST's similarity to the
  nearest example task (dropped above 90%).

TEXT

echo "== verify -> profile -> reward: two candidates for the example CPU task (the first run builds torch's" \
  "header, minutes)" >&2
task=$examples/workspaces/bias-relu-cpu
rm -rf "$out/candidates"
mkdir -p "$out/candidates"
cp -r "$task" "$out/candidates/honest"
cp -r "$task" "$out/candidates/cheat"
cat >"$out/candidates/cheat/model_new.py" <<'PY'
import torch
import torch.nn as nn

import cuda_extension  # noqa: F401  (built, then ignored: the work is done by torch)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return torch.relu(x + self.bias) * 2.0
PY
for name in honest cheat; do
  jq -nc --rawfile m "$task/model.py" --arg w "$out/candidates/$name" --arg id "$name" \
    '{id: $id, task: {model_py: $m}, candidate: {workspace: $w}}'
done >"$out/candidates.jsonl"
"$bin/cudaagent-verify" --quiet --device cpu --db "$out/store.db" "$out/candidates.jsonl" |
  "$bin/cudaagent-profile" --quiet --device cpu --db "$out/store.db" |
  "$bin/cudaagent-reward" --quiet --db "$out/store.db" --errors "$out/unscored.jsonl" -o "$out/scored.jsonl"
# Profile times the PASS against eager (Debian's torch 1.13 has no torch.compile; the record says
# so) in the same sandbox; the REJECT_POLICY passes through untimed. Reward reads both keys.
printf '%-8s %-15s %-7s %-17s %s\n' id verdict reward "speedup (eager)" reason
jq -r '[.id, .reward.verdict, (.reward.value | tostring),
        (if .reward.inputs.eager then (.reward.inputs.eager.speedup * 1000 | floor / 1000 | tostring) + "x" else "-" end),
        ((.profile.reason // .verify.reason // "")[0:70])] | @tsv' "$out/scored.jsonl" |
  while IFS=$'\t' read -r id verdict value speedup reason; do
    printf '%-8s %-15s %-7s %-17s %s\n' "$id" "$verdict" "$value" "$speedup" "$reason"
  done
cat <<'TEXT'
  reward: -1 failed or rejected (REJECT_POLICY: the cheat computes with torch instead of its kernel);
  1 correct but not faster than eager PyTorch by more than 5%; 2 faster than eager; 3 faster than
  eager and torch.compile. speedup: eager's time over the candidate's. On this CPU example it is
  below 1 by design: the kernel is a plain C++ loop against PyTorch's vectorised eager, and the
  point of the run is the path (sandbox, checks, timing), not the speed. On a GPU the same chain
  times CUDA kernels against eager and torch.compile.

TEXT
"$bin/cudaagent-reward" --summary --plots "$out/plots" "$out/scored.jsonl" >"$out/summary.txt" 2>/dev/null
sed -n '1,3p' "$out/summary.txt"
echo

echo "== reward: $examples/reward-sample.jsonl" >&2
"$bin/cudaagent-reward" --quiet --db "$out/store.db" --errors "$out/sample-errors.jsonl" \
  "$examples/reward-sample.jsonl" -o "$out/sample-scored.jsonl"
printf '%-20s %-15s %6s  %s\n' id verdict reward reason
jq -r '[.id, .reward.verdict, (.reward.value|tostring), .reward.reason] | @tsv' "$out/sample-scored.jsonl" |
  while IFS=$'\t' read -r id verdict value reason; do
    printf '%-20s %-15s %6s  %s\n' "$id" "$verdict" "$value" "$reason"
  done
echo
echo "error records (not scored):"
jq -c '.error | {line, id, reason}' "$out/sample-errors.jsonl"
cat <<TEXT

Outputs are in $out:
  synthesized.jsonl, filtered.jsonl, tasks.jsonl   the data side, stage by stage
  candidates.jsonl, scored.jsonl, unscored.jsonl   the scoring side (verify, profile, reward keys)
  summary.txt, plots/*.svg                         cudaagent-reward --summary of scored.jsonl
  sample-scored.jsonl, sample-errors.jsonl         the bundled sample, scored
  store.db                                         every result (SQLite); a re-run takes them from it
Read any of them with jq, e.g.  jq .profile $out/scored.jsonl
TEXT
