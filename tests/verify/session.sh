#!/usr/bin/env bash
# One verifier, a stream of candidates: the task's evaluation session stays open across candidates
# of the same task (the record says session.task_reused), a build failure does not end it, and a
# candidate of another task gets a session of its own and a correct verdict, as does the first
# task's next candidate after it. Args: BIN_DIR BASE_WORKSPACE.
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
"$bin/cudaagent-verify" --quiet --device cpu "$scratch/in.jsonl" >"$scratch/out.jsonl" ||
  fail "cudaagent-verify exited $?"
why() { jq -c --arg id "$1" 'select(.id == $id) | .verify | {reason, timings_s}' "$scratch/out.jsonl" | cut -c1-800; }
row() { jq -r --arg id "$1" 'select(.id == $id) | "\(.verify.verdict) \(.verify.session.task_reused // false)"' "$scratch/out.jsonl"; }
[[ $(row first) == "PASS false" ]] || fail "first: $(row first): $(why first)"
[[ $(row broken) == "FAIL_COMPILE true" ]] || fail "broken: $(row broken): $(why broken)"
[[ $(row after-broken) == "PASS true" ]] || fail "after a build failure: $(row after-broken): $(why after-broken)"
[[ $(row again) == "PASS true" ]] || fail "again: $(row again): $(why again)"
[[ $(row other-task) == "PASS false" ]] || fail "another task reused the first task's session: $(row other-task): $(why other-task)"
[[ $(row back) == "PASS false" ]] || fail "back to the first task: $(row back): $(why back)"
echo ok
