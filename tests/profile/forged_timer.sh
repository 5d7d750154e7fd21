#!/usr/bin/env bash
# Attack catalog case 24: the candidate patches time.perf_counter (on the GPU it would be
# torch.cuda.Event.elapsed_time) so that its calls look ten times faster than they are, and sleeps
# 20 ms in every call: far above eager's time for this task even on a loaded machine, so the
# comparison below does not depend on the load. No clock in its process is read: the session's
# owner times every call on its own clock, so the sleep is in its time and the forgery changes
# nothing. Importing time is refused by model_new.py's static policy before anything runs
# (python_policy.sh): --no-python-policy lets the forgery reach the timing this case tests.
source "$(dirname "$0")/lib.sh"
ws=$(workspace forger "import time
import torch.nn as nn
import torch
import cuda_extension

_real = time.perf_counter
_start = _real()
time.perf_counter = lambda: _start + (_real() - _start) * 0.1


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        time.sleep(0.02)
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)")
profile --no-python-policy "$ws" >"$scratch/out.json" || fail "exited $?"
[[ $(field .profile.verdict "$scratch/out.json") == PASS ]] || fail "$(jq -c '.profile | {verdict, reason}' "$scratch/out.json" | cut -c1-900)"
median=$(field .profile.times_ms.candidate.median "$scratch/out.json")
awk -v m="$median" 'BEGIN { exit !(m >= 15) }' || fail "the candidate's 20 ms sleep is not in its time: median $median ms"
speedup=$(field .profile.speedup.eager.median "$scratch/out.json")
awk -v s="$speedup" 'BEGIN { exit !(s < 1) }' || fail "a forged timer earned a speedup: $speedup"
echo ok
