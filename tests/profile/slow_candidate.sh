#!/usr/bin/env bash
# A candidate that sleeps 20 ms in forward (far above the noise of a loaded machine) is timed as
# slow (the sleep is inside its own calls, so it is honest time, not flagged), and is slower than
# eager with confidence.
# It imports time, which the static policy refuses (python_policy.sh):
# --no-python-policy lets it reach the timing.
source "$(dirname "$0")/lib.sh"
ws=$(workspace sleepy "import time
import torch.nn as nn
import torch
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        time.sleep(0.02)
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)")
profile --no-python-policy "$ws" >"$scratch/out.json" || fail "exited $?"
[[ $(field .profile.verdict "$scratch/out.json") == PASS ]] || fail "$(jq -c .profile "$scratch/out.json" | cut -c1-600)"
median=$(field .profile.times_ms.candidate.median "$scratch/out.json")
awk -v m="$median" 'BEGIN { exit !(m >= 15.0) }' || fail "a 20 ms sleep timed as $median ms"
[[ $(field .profile.comparison.eager "$scratch/out.json") == slower ]] || fail "not slower than eager: $(jq -c .profile.speedup.eager "$scratch/out.json")"
echo ok
