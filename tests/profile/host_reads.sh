#!/usr/bin/env bash
# Issue 10, class 1 in profile: a forward that computes in Python, reading the values one by one,
# is REJECT_POLICY on its audited calls (the first call always is), with verify's reason; so is one
# that catches the error the audit raises and falls back to its kernel. A forward that reads a few
# scalars for its kernel's arguments is timed as usual.
source "$(dirname "$0")/lib.sh"
cases=$(cd "$(dirname "$0")/../verify/cases" && pwd)
for name in i10-c1t-python-compute-float i10-c1x-python-compute-catches-the-audit; do
  ws=$(workspace "$name" "$(cat "$cases/$name/model_new.py")")
  profile "$ws" >"$scratch/$name.json" || fail "$name: exited $?"
  verdict=$(field .profile.verdict "$scratch/$name.json")
  reason=$(field .profile.reason "$scratch/$name.json")
  [[ $verdict == REJECT_POLICY ]] || fail "$name: $verdict ($reason), expected REJECT_POLICY"
  [[ $reason == *"read one by one"* ]] || fail "$name: reason '$reason'"
done
ws=$(workspace scalars "$(cat "$cases/control-i10-scalar-reads/model_new.py")")
profile "$ws" >"$scratch/scalars.json" || fail "scalars: exited $?"
verdict=$(field .profile.verdict "$scratch/scalars.json")
[[ $verdict == PASS ]] || fail "scalars: $verdict ($(field .profile.reason "$scratch/scalars.json"))"
[[ $(jq '.profile.times_ms.candidate.median > 0' "$scratch/scalars.json") == true ]] ||
  fail "scalars: the candidate was not timed"
echo "host reads: REJECT_POLICY past the budget, the scalar reads timed"
