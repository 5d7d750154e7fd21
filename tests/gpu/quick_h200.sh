#!/usr/bin/env bash
# A short GPU smoke run (a few minutes): the example workspace and a handful of catalog cases.
# Usage: tests/gpu/quick_h200.sh BIN_DIR OUT
set -uo pipefail
bin=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
base=$root/share/examples/workspaces/bias-relu-cuda
work=$(mktemp -d)
echo "| case | expected | got | seconds | reason |" >"$out/quick.md"
for name in control-honest 18-reference-call 12-always-equal-object 32-rng-reseed-precomputed 54-cpu-infinite-loop \
  i10-c1a-dispatch-mode-popped i10-c1d-torch-in-a-helper-thread i10-c10-control-module-idioms; do
  rm -rf "$work/ws" && cp -r "$base" "$work/ws"
  (cd "$root/tests/verify/cases/$name" && find . -type f ! -name expected ! -name flags) | while read -r f; do cp "$root/tests/verify/cases/$name/$f" "$work/ws/$f"; done
  flags=$(cat "$root/tests/verify/cases/$name/flags" 2>/dev/null || true)  # --no-python-policy
  start=$(date +%s.%N)
  record=$("$bin/cudaagent-verify" -q --device cuda --task "$base/model.py" --timeout 15 $flags "$work/ws" 2>>"$out/quick.log")
  end=$(date +%s.%N)
  echo "$record" >>"$out/quick.jsonl"
  echo "| $name | $(cat "$root/tests/verify/cases/$name/expected") | $(jq -r .verify.verdict <<<"$record") | $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') | $(jq -r .verify.reason <<<"$record" | cut -c1-100) |" >>"$out/quick.md"
done
cat "$out/quick.md"
