#!/usr/bin/env bash
# Issue 11: --call-wait chooses how the session's owner and runners wait for a call's messages.
# Spinning changes nothing but the wait: the candidate still PASSes with every call checked, the
# record says which wait timed it, a profile stored under one wait is not taken for the other, and
# a wait that does not exist is refused before anything runs.
source "$(dirname "$0")/lib.sh"
ws=$(workspace honest)
model_py=$(cat "$base/model.py"; echo x); model_py=${model_py%x}
jq -nc --arg m "$model_py" --arg w "$ws" \
  '{id: "pass", task: {model_py: $m}, candidate: {workspace: $w}, verify: {verdict: "PASS"}}' >"$scratch/in.jsonl"
db=$scratch/store.db

profile --db "$db" --call-wait spin "$scratch/in.jsonl" >"$scratch/spin.jsonl" || fail "spin exited $?"
[[ $(field .profile.verdict "$scratch/spin.jsonl") == PASS ]] || fail "spin: $(jq -c .profile "$scratch/spin.jsonl" | cut -c1-600)"
[[ $(field .profile.checks.all_checked "$scratch/spin.jsonl") == true ]] || fail "spin: not every call checked"
[[ $(field .profile.call_cost.wait "$scratch/spin.jsonl") == spin ]] || fail "spin: the record says $(field .profile.call_cost.wait "$scratch/spin.jsonl")"
[[ $(field .profile.settings.call_wait "$scratch/spin.jsonl") == spin ]] || fail "spin: settings say $(field .profile.settings.call_wait "$scratch/spin.jsonl")"

# On the CPU, auto blocks (a spinning process would take a core from the one doing the work).
profile --db "$db" "$scratch/in.jsonl" >"$scratch/auto.jsonl" || fail "auto exited $?"
[[ $(field .profile.verdict "$scratch/auto.jsonl") == PASS ]] || fail "auto: $(jq -c .profile "$scratch/auto.jsonl" | cut -c1-600)"
[[ $(field .profile.call_cost.wait "$scratch/auto.jsonl") == block ]] || fail "auto on the CPU: $(field .profile.call_cost.wait "$scratch/auto.jsonl")"
[[ $(jq -r '.profile.store // "none"' "$scratch/auto.jsonl") == none ]] || fail "the profile stored under spin was taken for auto"

if profile --call-wait sleep "$scratch/in.jsonl" >"$scratch/bad.jsonl" 2>"$scratch/bad.err"; then
  fail "an unknown wait was accepted"
fi
grep -q "call-wait" "$scratch/bad.err" || fail "no word of the wait: $(head -c 300 "$scratch/bad.err")"
[[ ! -s $scratch/bad.jsonl ]] || fail "an unknown wait still wrote records"
echo ok
