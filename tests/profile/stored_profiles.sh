#!/usr/bin/env bash
# Issue 16: with --db a candidate's profile is kept and a re-run takes it (store.hit), adding no
# row; rewards scored from it are the same and add no row either; --remeasure times it again.
source "$(dirname "$0")/lib.sh"
ws=$(workspace honest)
model_py=$(cat "$base/model.py"; echo x); model_py=${model_py%x}
jq -nc --arg m "$model_py" --arg w "$ws" \
  '{id: "pass", task: {model_py: $m}, candidate: {workspace: $w}, verify: {verdict: "PASS"}}' >"$scratch/in.jsonl"
db=$scratch/store.db
profile --db "$db" "$scratch/in.jsonl" | "$bin/cudaagent-reward" --quiet --db "$db" >"$scratch/first.jsonl" ||
  fail "first run exited $?"
[[ $(jq -r .profile.verdict "$scratch/first.jsonl") == PASS ]] || fail "first run: $(jq -c .profile "$scratch/first.jsonl" | cut -c1-400)"
[[ $(jq -r '.profile.store // "none"' "$scratch/first.jsonl") == none ]] || fail "a fresh profile says it came from the store"
count() { sqlite3 "$db" "SELECT count(*) FROM results WHERE stage = '$1'"; }
[[ $(count profile) == 1 && $(count reward) == 1 ]] || fail "after one run: profile $(count profile), reward $(count reward)"

profile --db "$db" "$scratch/in.jsonl" | "$bin/cudaagent-reward" --quiet --db "$db" >"$scratch/second.jsonl" ||
  fail "second run exited $?"
[[ $(jq -r .profile.store.hit "$scratch/second.jsonl") == true ]] || fail "the second run timed again"
[[ $(jq -c 'del(.profile.store)' "$scratch/second.jsonl") == "$(jq -c . "$scratch/first.jsonl")" ]] ||
  fail "the stored profile differs from the one first written"
[[ $(count profile) == 1 && $(count reward) == 1 ]] || fail "the re-run added rows: profile $(count profile), reward $(count reward)"

profile --db "$db" --remeasure "$scratch/in.jsonl" >"$scratch/third.jsonl" || fail "--remeasure exited $?"
[[ $(jq -r '.profile.store // "none"' "$scratch/third.jsonl") == none ]] || fail "--remeasure took the stored profile"
[[ $(count profile) == 1 ]] || fail "--remeasure replaced or duplicated the stored profile"
echo ok
