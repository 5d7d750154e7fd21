#!/usr/bin/env bash
# --forwards-per-call 3: a call runs the candidate three times, each on fresh inputs in its own
# slot of the shared buffers, and the owner judges each. The honest example passes and says so in
# its record; a candidate that returns one buffer it reuses (its outputs copied out after each
# forward) passes too, also with --forward-sync call; one that is right only on the first forward
# of every three fails; the baselines measured with one forward per call are not reused for three.
source "$(dirname "$0")/lib.sh"
ws=$(workspace honest)
profile --forwards-per-call 3 "$ws" >"$scratch/honest.json" || fail "honest: exited $?"
[[ $(field .profile.verdict "$scratch/honest.json") == PASS ]] ||
  fail "honest: $(jq -c .profile "$scratch/honest.json" | cut -c1-600)"
[[ $(field .profile.settings.forwards_per_call "$scratch/honest.json") == 3 ]] ||
  fail "the record's settings: $(jq -c .profile.settings "$scratch/honest.json")"
jq -e '.profile.checks | .calls > 0 and .forwards_per_call == 3 and .forwards == 3 * .calls' "$scratch/honest.json" >/dev/null ||
  fail "the record's checks: $(jq -c .profile.checks "$scratch/honest.json")"

ws=$(workspace reused-buffer "import torch.nn as nn
import torch
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))
        self.out = None

    def forward(self, x):
        result = cuda_extension.bias_relu_scale(x, self.bias, 2.0)
        if self.out is None or self.out.shape != result.shape:
            self.out = torch.empty_like(result)
        self.out.copy_(result)
        return self.out")
profile --forwards-per-call 3 "$ws" >"$scratch/reused.json" || fail "reused: exited $?"
[[ $(field .profile.verdict "$scratch/reused.json") == PASS ]] ||
  fail "reused buffer: $(jq -c .profile "$scratch/reused.json" | cut -c1-600)"

# --forward-sync call: the same reused buffer, with one wait for the device per call instead of two
# per forward (on the CPU there is nothing to wait for: this checks the setting reaches the record
# and the baselines' key, and that the runner's other path serves every forward).
profile --forwards-per-call 3 --forward-sync call "$ws" >"$scratch/reused-call.json" || fail "reused, call: exited $?"
[[ $(field .profile.verdict "$scratch/reused-call.json") == PASS ]] ||
  fail "reused buffer, call: $(jq -c .profile "$scratch/reused-call.json" | cut -c1-600)"
[[ $(field .profile.settings.forward_sync "$scratch/reused-call.json") == call ]] ||
  fail "the record's settings: $(jq -c .profile.settings "$scratch/reused-call.json")"
[[ $(field .profile.baselines.key "$scratch/reused-call.json") != $(field .profile.baselines.key "$scratch/reused.json") ]] ||
  fail "one baseline key for --forward-sync each and call"
[[ $(field .profile.settings.forward_sync "$scratch/reused.json") == each ]] ||
  fail "the default: $(jq -c .profile.settings "$scratch/reused.json")"

ws=$(workspace first-of-three "import torch.nn as nn
import torch
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls % 3 != 1:
            return torch.zeros_like(x)
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)")
profile --forwards-per-call 3 "$ws" >"$scratch/cheat.json" || fail "first-of-three: exited $?"
[[ $(field .profile.verdict "$scratch/cheat.json") == FAIL_INCORRECT ]] ||
  fail "first-of-three: $(jq -c .profile "$scratch/cheat.json" | cut -c1-600)"

# One store, both settings: the baselines measured for three forwards are not those for one.
ws=$(workspace honest-one)
profile "$ws" >"$scratch/one.json" || fail "one forward: exited $?"
[[ $(field .profile.baselines.key "$scratch/one.json") != $(field .profile.baselines.key "$scratch/honest.json") ]] ||
  fail "one baseline key for one and three forwards per call"
echo ok
