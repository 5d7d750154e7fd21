#!/usr/bin/env bash
# The main job on the bundled example. Today: score the sample verify/profile records with
# cudaagent-reward (one line is torn on purpose, to show an error record). As stages land this
# grows into synthesise -> filter -> dedup -> verify -> profile -> reward.
# Usage: examples/pipeline.sh [BIN_DIR]   (default: build/release/bin)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== reward: $here/share/examples/reward-sample.jsonl" >&2
"$bin/cudaagent-reward" --db "$work/store.db" --errors "$work/errors.jsonl" \
  "$here/share/examples/reward-sample.jsonl" >"$work/scored.jsonl"

printf '%-20s %-15s %6s  %s\n' id verdict reward reason
jq -r '[.id, .reward.verdict, (.reward.value|tostring), .reward.reason] | @tsv' "$work/scored.jsonl" |
  while IFS=$'\t' read -r id verdict value reason; do
    printf '%-20s %-15s %6s  %s\n' "$id" "$verdict" "$value" "$reason"
  done
echo
echo "error records (not scored):"
jq -c '.error | {line, id, reason}' "$work/errors.jsonl"
