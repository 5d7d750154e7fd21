#!/usr/bin/env bash
# Workspace-directory modes release each record as it is made (--check here, the quick one): a
# reader that goes away ends the run quietly with 141; an output that cannot be written is exit 1
# with the reason.
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
base=$root/share/examples/workspaces/bias-relu-cuda
if "$bin/cudaagent-verify" --check "$base" 2>&1 >/dev/null | grep -q "needs NVRTC"; then
  echo "skipped: built without the CUDA Toolkit"
  exit 0
fi
for i in 1 2 3 4 5 6; do cp -r "$base" "$scratch/w$i"; done
{
  code=0
  "$bin/cudaagent-verify" --quiet --check "$scratch"/w* 2>"$scratch/err" || code=$?
  echo $code >"$scratch/code"
} | head -c 1 >/dev/null
[[ $(cat "$scratch/code") == 141 ]] || fail "a closed pipe exited $(cat "$scratch/code"): $(cat "$scratch/err")"
[[ ! -s $scratch/err ]] || fail "a closed pipe is not quiet: $(cat "$scratch/err")"
code=0
"$bin/cudaagent-verify" --quiet --check "$scratch/w1" >/dev/full 2>"$scratch/err" || code=$?
[[ $code == 1 ]] || fail "a full disk exited $code"
grep -q "No space left on device" "$scratch/err" || fail "no reason: $(cat "$scratch/err")"
echo ok
