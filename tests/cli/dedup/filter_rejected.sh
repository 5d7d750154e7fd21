#!/usr/bin/env bash
# A task the filter rejected (filter.kept false) passes through dedup untouched: not compared, not
# counted, and never in the index, so a valid look-alike after it is kept. Both the record-by-record
# path (stdin) and the parse-ahead path (a regular file, several helpers).
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
first=$(head -1 "$root/share/examples/dedup/tasks.jsonl")
# The same task twice: first as the filter rejected it, then as a kept one under another id.
jq -c '. + {id: "rejected", filter: {kept: false, reasons: [{check: "timing", detail: "outside the window"}]}}' \
  <<<"$first" >"$scratch/in.jsonl"
jq -c '. + {id: "valid", filter: {kept: true, reasons: []}}' <<<"$first" >>"$scratch/in.jsonl"
for mode in stdin file; do
  if [[ $mode == stdin ]]; then
    "$bin/cudaagent-dedup" -j 1 <"$scratch/in.jsonl" >"$scratch/out" 2>"$scratch/err" || fail "$mode: exit $?"
  else
    "$bin/cudaagent-dedup" -j 2 "$scratch/in.jsonl" >"$scratch/out" 2>"$scratch/err" || fail "$mode: exit $?"
  fi
  [[ $(wc -l <"$scratch/out") == 2 ]] || fail "$mode: expected both records: $(cat "$scratch/out")"
  cmp -s <(head -1 "$scratch/out") <(head -1 "$scratch/in.jsonl") || fail "$mode: the rejected record changed"
  [[ $(sed -n 2p "$scratch/out" | jq -r '.id + " " + (.dedup.kept | tostring)') == "valid true" ]] ||
    fail "$mode: the valid look-alike was not kept: $(sed -n 2p "$scratch/out")"
  grep -q "1 of 1 tasks kept" "$scratch/err" || fail "$mode: the rejected task was counted: $(cat "$scratch/err")"
  grep -q "1 tasks the filter rejected passed through untouched" "$scratch/err" ||
    fail "$mode: no note of the pass-through: $(cat "$scratch/err")"
done
echo "ok"
