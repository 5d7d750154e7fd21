#!/usr/bin/env bash
# Issue 9: profile runs model_new.py's static policy as verify does (the same code), so a timed
# candidate passes the same static rules as a checked one. Without --no-python-policy, a forbidden
# import is REJECT_POLICY and a reach into the harness FLAG_HACK, with verify's reasons, and nothing
# is timed. A profile stored with the policy off is not reused with it on (the store's key holds the
# setting).
source "$(dirname "$0")/lib.sh"
forward='

class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)'
untimed() {  # NAME: no candidate sample reached the record
  [[ $(jq '[.profile.times_ms.candidate.median // empty] | length' "$scratch/$1.json") == 0 ]] ||
    fail "$1: the candidate was timed"
}

ws=$(workspace importer "import time
import torch.nn as nn
import torch
import cuda_extension
$forward")
profile "$ws" >"$scratch/import.json" || fail "exited $?"
[[ $(field .profile.verdict "$scratch/import.json") == REJECT_POLICY ]] ||
  fail "forbidden import: $(jq -c '.profile | {verdict, reason}' "$scratch/import.json" | cut -c1-600)"
field .profile.reason "$scratch/import.json" | grep -q '^python-import: model_new.py:1: ' ||
  fail "reason: $(field .profile.reason "$scratch/import.json")"
[[ $(field .profile.settings.python_policy "$scratch/import.json") == true ]] || fail "settings.python_policy is not true"
[[ $(jq 'has("python_policy")' <<<"$(field .profile.timings_s "$scratch/import.json")") == true ]] ||
  fail "no python_policy timing: $(jq -c .profile.timings_s "$scratch/import.json")"
untimed import

ws=$(workspace reacher "import sys
import torch.nn as nn
import torch
import cuda_extension
$forward")
profile "$ws" >"$scratch/sys.json" || fail "exited $?"
[[ $(field .profile.verdict "$scratch/sys.json") == FLAG_HACK ]] ||
  fail "interpreter import: $(jq -c '.profile | {verdict, reason}' "$scratch/sys.json" | cut -c1-600)"
untimed sys

# The store: with the policy off the importer is timed (PASS) and stored; with it on the same
# candidate is not taken from the store but refused.
model_py=$(cat "$base/model.py"; echo x); model_py=${model_py%x}
jq -nc --arg m "$model_py" --arg w "$scratch/importer" \
  '{id: "importer", task: {model_py: $m}, candidate: {workspace: $w}, verify: {verdict: "PASS"}}' >"$scratch/in.jsonl"
profile --no-python-policy --db "$scratch/p.db" "$scratch/in.jsonl" >"$scratch/off.jsonl" || fail "policy off exited $?"
[[ $(jq -r .profile.verdict "$scratch/off.jsonl") == PASS ]] ||
  fail "policy off: $(jq -c '.profile | {verdict, reason}' "$scratch/off.jsonl" | cut -c1-600)"
[[ $(jq -r .profile.settings.python_policy "$scratch/off.jsonl") == false ]] || fail "policy off: settings say otherwise"
profile --db "$scratch/p.db" "$scratch/in.jsonl" >"$scratch/on.jsonl" || fail "policy on exited $?"
[[ $(jq -r '.profile.store // "none"' "$scratch/on.jsonl") == none ]] || fail "a profile made with the policy off was reused"
[[ $(jq -r .profile.verdict "$scratch/on.jsonl") == REJECT_POLICY ]] ||
  fail "policy on, stored: $(jq -c '.profile | {verdict, reason}' "$scratch/on.jsonl" | cut -c1-600)"
echo ok
