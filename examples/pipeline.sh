#!/usr/bin/env bash
# The main job on the bundled example, on the CPU: synthesise a few tiny tasks and dedup them
# against the example tasks (data side); verify two candidates of the example CPU task, one honest
# and one that calls torch instead of its kernel (scoring side); and score the bundled
# verify/profile sample with cudaagent-reward (one line is torn on purpose, to show an error
# record). Profile and filter join when they land; on a GPU the same chain runs with --device cuda.
# Usage: examples/pipeline.sh [BIN_DIR]   (default: build/release/bin)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
examples=$here/share/examples

echo "== synth -> dedup: 8 tiny tasks (seed 1), deduplicated against the example tasks" >&2
"$bin/cudaagent-synth" --quiet --seed 1 --count 8 --batch 2 --max-dim 16 |
  "$bin/cudaagent-dedup" --quiet --annotate --reference "examples=$examples/workspaces" >"$work/tasks.jsonl"
printf '%-14s %-44s %5s %6s  %s\n' id ops depth kept nearest
jq -r '[.id[0:12], (.task.ops | join(",")), (.task.meta.depth|tostring), (.dedup.kept|tostring),
        ((.dedup.score*100|floor|tostring) + "% " + ((.dedup.nearest.name // "-")[0:24]))] | @tsv' "$work/tasks.jsonl" |
  while IFS=$'\t' read -r id ops depth kept nearest; do
    printf '%-14s %-44s %5s %6s  %s\n' "$id" "$ops" "$depth" "$kept" "$nearest"
  done
echo

echo "== verify: two candidates for the example CPU task (the first run builds torch's header, minutes)" >&2
task=$examples/workspaces/bias-relu-cpu
cp -r "$task" "$work/honest"
cp -r "$task" "$work/cheat"
cat >"$work/cheat/model_new.py" <<'PY'
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
  jq -nc --rawfile m "$task/model.py" --arg w "$work/$name" --arg id "$name" \
    '{id: $id, task: {model_py: $m}, candidate: {workspace: $w}}'
done | "$bin/cudaagent-verify" --quiet --device cpu --db "$work/store.db" >"$work/verified.jsonl"
printf '%-20s %-15s %s\n' id verdict reason
jq -r '[.id, .verify.verdict, .verify.reason[0:90]] | @tsv' "$work/verified.jsonl" |
  while IFS=$'\t' read -r id verdict reason; do printf '%-20s %-15s %s\n' "$id" "$verdict" "$reason"; done
echo

echo "== reward: $examples/reward-sample.jsonl" >&2
"$bin/cudaagent-reward" --db "$work/store.db" --errors "$work/errors.jsonl" \
  "$examples/reward-sample.jsonl" >"$work/scored.jsonl"

printf '%-20s %-15s %6s  %s\n' id verdict reward reason
jq -r '[.id, .reward.verdict, (.reward.value|tostring), .reward.reason] | @tsv' "$work/scored.jsonl" |
  while IFS=$'\t' read -r id verdict value reason; do
    printf '%-20s %-15s %6s  %s\n' "$id" "$verdict" "$value" "$reason"
  done
echo
echo "error records (not scored):"
jq -c '.error | {line, id, reason}' "$work/errors.jsonl"
