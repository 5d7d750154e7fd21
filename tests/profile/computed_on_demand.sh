#!/usr/bin/env bash
# Timed calls return garbage at once, hoping that only the outputs the driver asks to check get
# computed, on demand (the candidate tries to patch the harness it shares a process with). Every
# timed call is a checked call, judged from the output buffer the moment it answers: the first
# one is FAIL_INCORRECT.
# It imports sys, which the static policy flags (python_policy.sh):
# --no-python-policy lets it reach the session this case tests.
source "$(dirname "$0")/lib.sh"
ws=$(workspace lazy "import sys
import torch.nn as nn
import torch
import cuda_extension

pending = {}


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        out = torch.zeros_like(x)
        pending[id(out)] = (x, self)
        return out


harness = sys.modules.get('__main__')
if harness is not None and hasattr(harness, 'Session'):
    original = harness.Session.write_output

    def write_output(self, value, path):
        if id(value) in pending:
            x, model = pending[id(value)]
            value = cuda_extension.bias_relu_scale(x, model.bias, 2.0)
        return original(self, value, path)

    harness.Session.write_output = write_output")
profile --no-python-policy "$ws" >"$scratch/out.json" || fail "exited $?"
[[ $(field .profile.verdict "$scratch/out.json") == FAIL_INCORRECT ]] || fail "$(jq -c '.profile | {verdict, reason, checks}' "$scratch/out.json" | cut -c1-600)"
field .profile.reason "$scratch/out.json" | grep -q "timed call 0" || fail "reason: $(field .profile.reason "$scratch/out.json")"
echo ok
