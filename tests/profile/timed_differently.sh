#!/usr/bin/env bash
# Attack catalog case 23: correct for its first calls (what a short verification sees), wrong
# afterwards (what timing sees). From its third call on: a round has at least three calls, so the
# test does not depend on how many calls the machine's load lets profile make. The hidden checks of timed calls catch it:
# FAIL_INCORRECT.
source "$(dirname "$0")/lib.sh"
ws=$(workspace late-cheat "import torch.nn as nn
import torch
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 2:
            return torch.zeros_like(x)
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)")
profile "$ws" >"$scratch/out.json" || fail "exited $?"
[[ $(field .profile.verdict "$scratch/out.json") == FAIL_INCORRECT ]] || fail "$(jq -c .profile "$scratch/out.json" | cut -c1-600)"
field .profile.reason "$scratch/out.json" | grep -q "timed call" || fail "reason: $(field .profile.reason "$scratch/out.json")"
# cudaagent-reward takes the profile's verdict over verify's PASS.
jq -c '. + {verify: {verdict: "PASS"}}' "$scratch/out.json" | "$bin/cudaagent-reward" --quiet >"$scratch/r.json"
[[ $(jq -r .reward.value "$scratch/r.json") == -1 ]] || fail "reward $(jq -c .reward "$scratch/r.json")"
echo ok
