#!/usr/bin/env bash
# Results people can read: --summary (the figures and what they mean), --summary-json, --plots
# (well-formed SVG), and the round trip through KernelBench's forms: synth --import-kernelbench
# makes task records with level/problem_id/name, reward --export-kernelbench writes results back.
source "$(dirname "$0")/../lib.sh"
bin=$1
reward=$bin/cudaagent-reward
sample=$(cd "$(dirname "$0")/../../.." && pwd)/share/examples/reward-sample.jsonl
"$reward" --quiet "$sample" >"$scratch/scored.jsonl" 2>/dev/null
"$reward" --summary --plots "$scratch/plots" "$scratch/scored.jsonl" >"$scratch/summary.txt" 2>"$scratch/err" ||
  fail "--summary: $(cat "$scratch/err")"
grep -q "^pass rate: 50.0% (3 of 6)$" "$scratch/summary.txt" || fail "summary: $(cat "$scratch/summary.txt")"
grep -q "^fast_1 " "$scratch/summary.txt" || fail "no fast_1 row"
grep -q "What the numbers mean" "$scratch/summary.txt" || fail "no legend"
for svg in rewards fast_p; do
  python3 -c 'import sys, xml.etree.ElementTree as t; t.parse(sys.argv[1])' "$scratch/plots/$svg.svg" ||
    fail "$svg.svg is not XML"
done
"$reward" --summary-json "$scratch/scored.jsonl" >"$scratch/summary.json" || fail "--summary-json"
[[ $(jq .all.passed "$scratch/summary.json") == 3 ]] || fail "summary json: $(cat "$scratch/summary.json")"
[[ $(jq '.all.speedup.eager.fast_p["0"]' "$scratch/summary.json") == 0.5 ]] || fail "fast_0 is not the pass rate"

# KernelBench: a dataset folder of two levels (and things that are not problems).
kb=$scratch/KernelBench
mkdir -p "$kb/level1" "$kb/level2"
for file in level1/1_Square_matmul_.py level1/2_ReLU.py level2/1_Conv_ReLU.py; do
  printf 'import torch\n# %s\n' "$file" >"$kb/$file"
done
echo notes >"$kb/level1/README.md"
"$bin/cudaagent-synth" --quiet --import-kernelbench "$kb" >"$scratch/tasks.jsonl" || fail "import failed"
[[ $(jq -sc 'map(.task.meta | [.level, .problem_id, .name])' "$scratch/tasks.jsonl") == \
   '[[1,1,"1_Square_matmul_"],[1,2,"2_ReLU"],[2,1,"1_Conv_ReLU"]]' ]] || fail "imported: $(cat "$scratch/tasks.jsonl")"
[[ $(jq -r .task.source "$scratch/tasks.jsonl" | sort -u) == kernelbench ]] || fail "source"
"$bin/cudaagent-synth" --quiet --import-kernelbench "$kb" --shard 1/2 >"$scratch/half.jsonl" || fail "import --shard"
[[ $(jq -r .task.meta.name "$scratch/half.jsonl") == 2_ReLU ]] || fail "shard 1/2 of the problems: $(cat "$scratch/half.jsonl")"
# Scored as if verified and profiled: one PASS, one failure, one with no profile.
jq -c 'select(.task.meta.name == "2_ReLU") + {verify: {verdict: "PASS", build: {ok: true}},
  profile: {times_ms: {eager: {median: 2, mean: 2, min: 1.9, max: 2.2, cv: 0.05, trials: 50},
                       compile: null, candidate: {median: 1, mean: 1, min: 0.9, max: 1.1, cv: 0.1, trials: 50}}}}' \
  "$scratch/tasks.jsonl" >"$scratch/evaluated.jsonl"
jq -c 'select(.task.meta.level == 2) + {verify: {verdict: "FAIL_COMPILE", build: {ok: false}}}' \
  "$scratch/tasks.jsonl" >>"$scratch/evaluated.jsonl"
"$reward" --quiet "$scratch/evaluated.jsonl" >"$scratch/kb-scored.jsonl" || fail "scoring"
"$reward" --export-kernelbench "$scratch/export" "$scratch/kb-scored.jsonl" 2>"$scratch/export.err" ||
  fail "export: $(cat "$scratch/export.err")"
[[ $(jq -c '."2"[0] | [.sample_id, .compiled, .correctness, .runtime]' "$scratch/export/level1/eval_results.json") == \
   '[0,true,true,1]' ]] || fail "level 1: $(cat "$scratch/export/level1/eval_results.json")"
[[ $(jq -c '."1"[0] | [.compiled, .correctness, .runtime]' "$scratch/export/level2/eval_results.json") == \
   '[false,false,-1]' ]] || fail "level 2: $(cat "$scratch/export/level2/eval_results.json")"
[[ $(jq '.level1."2_ReLU.py".mean' "$scratch/export/timing/baseline_time_torch.json") == 2 ]] ||
  fail "baseline: $(cat "$scratch/export/timing/baseline_time_torch.json")"
"$reward" --summary "$scratch/kb-scored.jsonl" | grep -q "^per level" || fail "no per-level table for KernelBench tasks"
echo ok
