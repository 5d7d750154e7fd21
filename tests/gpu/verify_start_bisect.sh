#!/usr/bin/env bash
# Where do a verify job's seconds between CUDA start and the first check go? (issue 3: 4.5-8 s per
# job on the H200 while a fresh Python starts CUDA in 0.2-0.4 s.) Three views, one table:
#  1. a fresh Python, no sandbox            (cuda_start_probe.py as a script)
#  2. a job of the harness worker, no sandbox (forked from a parent that imported torch, as verify's)
#  3. cudaagent-verify itself, with and without its sandbox, three candidates in one process, with
#     the harness's own phase timings (reference.*, candidate_reported.*)
# Usage: tests/gpu/verify_start_bisect.sh BIN_DIR OUT   (needs jq)
set -uo pipefail
bin=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
probe=$root/tests/gpu/cuda_start_probe.py
mkdir -p "$out"
echo "## 1. fresh python"
for _ in 1 2; do python3 "$probe"; done
echo "## 2. harness worker jobs (fork of a torch-importing parent)"
{
  for i in 1 2 3; do printf '{"job": "p%d", "script": "%s", "argv": [], "stdin": ""}\n' "$i" "$probe"; done
} | python3 "$root/share/harness/worker.py" --preload=torch 2>"$out/worker.stderr" |
  jq -rc 'select(.job) | {job, wall_seconds, probe: (.output | split("\n") | map(select(startswith("{"))) | last)}'
echo "## 3. cudaagent-verify (three candidates: cold build, then cached)"
ws=$root/share/examples/workspaces/bias-relu-cuda
for mode in sandbox no-sandbox; do
  flags=()
  [[ $mode == no-sandbox ]] && flags=(--no-sandbox --allow-unsandboxed)
  "$bin/cudaagent-verify" -q --device cuda "${flags[@]}" --task "$ws/model.py" "$ws" "$ws" "$ws" \
    2>>"$out/verify.stderr" >"$out/verify-$mode.jsonl"
  echo "### $mode"
  jq -rc '[.verify.verdict] + (.verify.timings_s | to_entries | map(select(.value >= 0.05) | "\(.key)=\(.value * 100 | round / 100)"))
          | join(" ")' "$out/verify-$mode.jsonl"
done
