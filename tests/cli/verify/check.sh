#!/usr/bin/env bash
# cudaagent-verify --check: NVRTC diagnostics with file:line for a broken kernel, none for a good
# one; an include it cannot stand in for (torch, an absolute or '..' path) makes the file "not
# checkable" instead of a false error, and the compiler never opens a file outside the workspace.
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
base=$root/share/examples/workspaces/bias-relu-cuda
if "$bin/cudaagent-verify" --check "$base" 2>&1 >/dev/null | grep -q "needs NVRTC"; then
  echo "skipped: built without the CUDA Toolkit"
  exit 0
fi
for name in good typo args torch escape; do cp -r "$base" "$scratch/$name"; done
kernel=kernels/bias_relu.cu
sed -i 's/x\[i\] + bias\[/x[i] + biass[/' "$scratch/typo/$kernel"
sed -i 's/(x, bias, out, n,/(x, bias, n,/' "$scratch/args/$kernel"
sed -i '1i #include <torch/extension.h>' "$scratch/torch/$kernel"
sed -i '1i #include "../../../../etc/passwd"' "$scratch/escape/$kernel"
"$bin/cudaagent-verify" --quiet --check "$scratch"/{good,typo,args,torch,escape} >"$scratch/out.jsonl" ||
  fail "--check exited $?"
field() { jq -r --arg id "$1" "select(.id == \$id) | $2" "$scratch/out.jsonl"; }
[[ $(field good .check.ok) == true ]] || fail "good kernel: $(field good .check)"
[[ $(field typo .check.ok) == false ]] || fail "typo passed"
field typo '.check.files[0].diagnostics' | grep -q "^kernels/bias_relu.cu:15: error: identifier \"biass\" is undefined" ||
  fail "typo diagnostics: $(field typo '.check.files[0].diagnostics')"
field args '.check.files[0].diagnostics' | grep -q "too few arguments" || fail "launch arguments not checked"
[[ $(field torch '.check.files[0].checkable') == false ]] || fail "torch include: $(field torch .check)"
[[ $(field escape '.check.files[0].checkable') == false ]] || fail "'..' include: $(field escape .check)"
field escape '.check.files[0].diagnostics' | grep -q root: && fail "the compiler read /etc/passwd"
code=0
"$bin/cudaagent-verify" --check "$scratch/out.jsonl" >/dev/null 2>&1 || code=$?
[[ $code == 1 ]] || fail "--check on a file exited $code, expected 1"
echo ok
