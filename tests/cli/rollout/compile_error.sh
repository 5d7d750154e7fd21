#!/usr/bin/env bash
# A kernel that does not compile: `bash utils/compile.sh` prints the compiler's error with the
# workspace-relative file and line (not the evaluator's private build folder) and exits 1; the
# final verdict is FAIL_COMPILE and the reward -1. A kernel that compiles but that the verifier's
# source scans refuse (a #line directive) is told so by the compile tool, before any verification.
source "$(dirname "$0")/../lib.sh"
bin=$1
source "$(dirname "$0")/lib.bash"

run --policy "replay:$scratch/broken.jsonl" "$task"
[[ $code == 0 ]] || fail "exit $code: $(cat "$scratch/err")"
[[ $(q '[.trajectory.evaluations[] | "\(.op):\(.exit_code):\(.verdict)"] | join(",")') == "compile:1:FAIL_COMPILE" ]] ||
  fail "evaluations: $(q .trajectory.evaluations)"
q '.trajectory.messages[] | select(.role == "tool" and .name == "Bash") | .content' >"$scratch/compile"
grep -q "^kernels/bias_relu.cpp:[0-9]*:[0-9]*: error: expected ';'" "$scratch/compile" || fail "no diagnostics: $(cat "$scratch/compile")"
grep -q "cudaagent-compile-" "$scratch/compile" && fail "the private build folder shows: $(grep cudaagent-compile- "$scratch/compile")"
[[ $(q .verify.verdict) == FAIL_COMPILE && $(q .reward.value) == -1 ]] || fail "final: $(q .verify.verdict)"

run --policy "replay:$scratch/linemarked.jsonl" "$task"
[[ $code == 0 ]] || fail "exit $code: $(cat "$scratch/err")"
q '.trajectory.messages[] | select(.role == "tool" and .name == "Bash") | .content' >"$scratch/compile"
grep -q "^the verifier will reject this workspace as it is:" "$scratch/compile" || fail "no warning: $(cat "$scratch/compile")"
grep -q "^  line-directive: kernels/bias_relu.cpp:[0-9]*: #line" "$scratch/compile" || fail "no finding: $(cat "$scratch/compile")"
[[ $(q .verify.verdict) == REJECT_POLICY ]] || fail "final: $(q .verify.verdict) $(q .verify.reason)"
echo "ok"
