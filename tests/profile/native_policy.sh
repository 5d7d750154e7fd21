#!/usr/bin/env bash
# Profile applies verify's compiler limits and static policy before anything of the candidate runs,
# with verify's verdicts: it must never time code that verify would reject (issue 10). A dlsym
# lookup in the candidate's object is FLAG_HACK, a direct at::native call REJECT_POLICY, a torch
# compute call in the sources REJECT_POLICY, and a build past --build-max-sources FAIL_RESOURCE.
source "$(dirname "$0")/lib.sh"
cases=$(cd "$(dirname "$0")/../verify/cases" && pwd)
expect() {  # NAME VERDICT REASON_PATTERN
  local verdict reason
  verdict=$(field .profile.verdict "$scratch/$1.json")
  reason=$(field .profile.reason "$scratch/$1.json")
  [[ $verdict == "$2" ]] || fail "$1: $verdict ($reason), expected $2"
  grep -qE "$3" <<<"$reason" || fail "$1: reason '$reason' does not match '$3'"
  # Nothing was timed: no candidate sample reached the record.
  [[ $(jq '[.profile.times_ms.candidate.median // empty] | length' "$scratch/$1.json") == 0 ]] ||
    fail "$1: the candidate was timed"
}

ws=$(workspace dlsym)
cp "$cases/i10c1-dlsym-lookup/kernels/bias_relu.cpp" "$ws/kernels/bias_relu.cpp"
profile "$ws" >"$scratch/dlsym.json" || fail "exited $?"
expect dlsym FLAG_HACK '^dynamic-lookup: kernels/bias_relu.cpp'

ws=$(workspace native)
cp "$cases/i10c1-at-native-direct/kernels/bias_relu.cpp" "$ws/kernels/bias_relu.cpp"
profile "$ws" >"$scratch/native.json" || fail "exited $?"
expect native REJECT_POLICY '^torch-compute: kernels/bias_relu.cpp'

ws=$(workspace source)
sed -i 's|return out;|return torch::relu(out);|' "$ws/kernels/bias_relu.cpp"
grep -q 'torch::relu(out)' "$ws/kernels/bias_relu.cpp" || fail "the base kernel changed: no 'return out;'"
profile "$ws" >"$scratch/source.json" || fail "exited $?"
expect source REJECT_POLICY '^torch-compute-in-source: kernels/bias_relu.cpp'

ws=$(workspace sources)
echo 'int extra = 0;' >"$ws/kernels/extra.cpp"
profile --build-max-sources 2 "$ws" >"$scratch/sources.json" || fail "exited $?"
expect sources FAIL_RESOURCE 'translation units'
echo ok
