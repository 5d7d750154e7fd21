#!/usr/bin/env bash
# A stop request reaches inside a call: a candidate whose forward never returns (within a call
# limit far beyond this test's own) is ended by SIGTERM, the verifier exits 128+15 without a
# verdict for it, and no process of the session is left. Args: BIN_DIR BASE_WORKSPACE.
set -euo pipefail
bin=$1 base=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cp -r "$base" "$scratch/ws"
cat >"$scratch/ws/model_new.py" <<'PY'
import time

import torch.nn as nn
import torch

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        time.sleep(3600)
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)
PY
"$bin/cudaagent-verify" --device cpu --task "$base/model.py" --timeout 3000 "$scratch/ws" \
  >"$scratch/out" 2>"$scratch/err" &
verifier=$!
# A job of a harness worker is a forked child with the worker's command line: a worker.py process
# whose parent is a worker.py process. Two such jobs (the owner's and the candidate's runner) mean
# the candidate is about to be called; then stop.
jobs() {
  ps -eo pid=,ppid=,args= | awk '/worker\.py/ { cmd[$1] = 1; parent[$1] = $2 } END {
    n = 0; for (p in parent) if (parent[p] in cmd) n++; print n }'
}
for _ in $(seq 1 1200); do
  (($(jobs) >= 2)) && break
  sleep 0.5
done
(($(jobs) >= 2)) || fail "the candidate's runner never started: $(cat "$scratch/err")"
sleep 3
kill -TERM "$verifier"
code=0
wait "$verifier" || code=$?
[[ $code == 143 ]] || fail "exit $code, expected 143: $(tail -5 "$scratch/err")"
grep -q "stopped by signal 15" "$scratch/err" "$scratch/out" || fail "the stop was not reported: $(tail -5 "$scratch/err")"
sleep 1
pgrep -f "$(basename "$scratch")" >/dev/null && fail "a process of this test's session outlived the verifier"
echo ok
