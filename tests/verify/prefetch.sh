#!/usr/bin/env bash
# cudaagent-verify --prefetch-reference: after a candidate, the next reference of its task is made
# while the next candidate is written; the next candidate of that task takes it (the record says
# reference_prefetched), a build failure leaves its unused reference for the next one, and a
# candidate of another task gets its own reference and a correct verdict. Args: BIN_DIR BASE_WORKSPACE.
set -euo pipefail
bin=$1 base=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cp -r "$base" "$scratch/ws"
cp -r "$base" "$scratch/broken"
echo "this is not C++" >>"$scratch/broken/kernels/bias_relu.cpp"
cp -r "$base" "$scratch/other"
{ echo "# another task: other bytes"; cat "$base/model.py"; } >"$scratch/other/model.py"
record() { jq -nc --rawfile m "$2/model.py" --arg w "$1" --arg id "$3" '{id: $id, task: {model_py: $m}, candidate: {workspace: $w}}'; }
{
  record "$scratch/ws" "$base" first
  record "$scratch/broken" "$base" broken
  record "$scratch/ws" "$base" after-broken
  record "$scratch/ws" "$base" again
  record "$scratch/other" "$scratch/other" other-task
  record "$scratch/ws" "$base" back
} >"$scratch/in.jsonl"
"$bin/cudaagent-verify" --quiet --device cpu --prefetch-reference "$scratch/in.jsonl" >"$scratch/out.jsonl" ||
  fail "cudaagent-verify exited $?"
row() { jq -r --arg id "$1" 'select(.id == $id) | "\(.verify.verdict) \(.verify.reference_prefetched // false)"' "$scratch/out.jsonl"; }
[[ $(row first) == "PASS false" ]] || fail "first: $(row first)"
[[ $(row broken) == "FAIL_COMPILE true" ]] || fail "broken: $(row broken)"
[[ $(row after-broken) == "PASS true" ]] || fail "after a build failure: $(row after-broken)"
[[ $(row again) == "PASS true" ]] || fail "again: $(row again)"
[[ $(row other-task) == "PASS false" ]] || fail "another task took a prefetched reference: $(row other-task)"
[[ $(row back) == "PASS false" ]] || fail "back to the first task: $(row back)"
echo ok
