#!/usr/bin/env bash
# The main job on the bundled example, on the CPU. Data side: synthesise a few tiny tasks, filter
# them in the sandbox (eager only with Debian's torch 1.13, which has no torch.compile: each record
# says so), and dedup the kept ones against the example tasks. Scoring side: verify two candidates
# of the example CPU task, one honest and one that calls torch instead of its kernel, and pass the
# verdicts to cudaagent-reward; then score the bundled verify/profile sample (one line is torn on
# purpose, to show an error record). Profile joins when it lands; on a GPU the same chain runs
# with --device cuda and the default 1-100 ms filter window.
# Usage: examples/pipeline.sh [BIN_DIR]   (default: build/release/bin)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
examples=$here/share/examples

echo "== synth -> filter -> dedup: 8 tiny tasks (seed 1), run in the sandbox, then deduplicated" >&2
# Tiny CPU tasks run in microseconds: the window is widened from the GPU's 1-100 ms.
"$bin/cudaagent-synth" --quiet --seed 1 --count 8 --batch 2 --max-dim 16 |
  "$bin/cudaagent-filter" --quiet --device cpu --window-ms 0.001,1000 --jobs 2 >"$work/filtered.jsonl"
jq -c 'select(.filter.kept)' "$work/filtered.jsonl" |
  "$bin/cudaagent-dedup" --quiet --annotate --reference "examples=$examples/workspaces" >"$work/tasks.jsonl"
printf '%-14s %-34s %-9s %-28s %s\n' id ops eager_ms filter dedup
jq -r --slurpfile deduped "$work/tasks.jsonl" '
  . as $t | ([$deduped[] | select(.id == $t.id)][0].dedup) as $d |
  [.id[0:12], (.task.ops | join(",")),
   (if .filter.eager_ms then (.filter.eager_ms.median * 1000 | floor / 1000 | tostring) else "-" end),
   (if .filter.kept then "kept" else "rejected: " + ([.filter.reasons[].check] | join(",")) end),
   (if $d then (if $d.kept then "kept" else "dropped" end) + " (nearest " +
      ($d.score * 100 | floor | tostring) + "%)" else "-" end)] | @tsv' "$work/filtered.jsonl" |
  while IFS=$'\t' read -r id ops ms filter dedup; do
    printf '%-14s %-34s %-9s %-28s %s\n' "$id" "$ops" "$ms" "$filter" "$dedup"
  done
echo "torch.compile check: $(jq -r .filter.compile "$work/filtered.jsonl" | sort -u | paste -sd ';')"
echo

echo "== verify -> profile -> reward: two candidates for the example CPU task (the first run builds torch's" \
  "header, minutes)" >&2
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
done | "$bin/cudaagent-verify" --quiet --device cpu --db "$work/store.db" | tee "$work/verified.jsonl" |
  "$bin/cudaagent-profile" --quiet --device cpu --db "$work/store.db" | tee "$work/profiled.jsonl" |
  "$bin/cudaagent-reward" --quiet --db "$work/store.db" --errors "$work/unscored.jsonl" >"$work/rewarded.jsonl"
# Profile times the PASS against eager (Debian's torch 1.13 has no torch.compile; the record says
# so) in the same sandbox; the REJECT_POLICY passes through untimed. Reward reads both keys.
printf '%-20s %-15s %-7s %s\n' id verdict reward reason
jq -r --slurpfile r "$work/rewarded.jsonl" --slurpfile u "$work/unscored.jsonl" '
  . as $v | ([$r[] | select(.id == $v.id)][0].reward.value // "-" | tostring) as $value |
  ([$u[] | select(.error.id == $v.id)][0].error.reason // "") as $why |
  [.id, (.profile.verdict // .verify.verdict), $value,
   (if $why != "" then "not scored: " + $why else (.profile.reason // .verify.reason) end)[0:90]] | @tsv' \
  "$work/profiled.jsonl" |
  while IFS=$'\t' read -r id verdict value reason; do
    printf '%-20s %-15s %-7s %s\n' "$id" "$verdict" "$value" "$reason"
  done
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
