#!/usr/bin/env bash
# Issue 10, class 9: candidate bytes never reach a terminal raw. A workspace whose name carries
# escape sequences and a candidate whose exception message carries more (ESC, CR, BEL, a C1 CSI)
# go through cudaagent-verify with messages on and cudaagent-profile --brief; stderr and the
# --brief text must hold none of those bytes, only their visible forms, one message per line.
# Args: BIN_DIR BASE_WORKSPACE.
set -euo pipefail
bin=$1 base=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
name=$'ws\e[2J\e]0;owned\a'
ws="$scratch/$name"
cp -r "$base" "$ws"
cat >"$ws/model_new.py" <<'PY'
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        raise RuntimeError("\x1b[32mPASS\x1b[0m\rcudaagent-verify: forged\x07\x9b2J")
PY
# No raw ESC, BEL, CR or C1 CSI (0xC2 0x9B) in text for people.
raw_bytes() { LC_ALL=C grep -c $'\e\\|\a\\|\r\\|\xc2\x9b' "$1" || true; }

"$bin/cudaagent-verify" --device cpu --task "$base/model.py" --timeout 60 "$ws" \
  >"$scratch/record.json" 2>"$scratch/stderr" || fail "cudaagent-verify exited $?"
[[ $(jq -r .verify.verdict "$scratch/record.json") == FAIL_RUNTIME ]] ||
  fail "expected FAIL_RUNTIME: $(jq -c .verify "$scratch/record.json" | head -c 400)"
# The record keeps the bytes (JSON-escaped by the writer); the reason names the escape.
jq -e '.verify.reason | contains("\u001b[32mPASS")' "$scratch/record.json" >/dev/null ||
  fail "the record lost the candidate's words: $(jq -r .verify.reason "$scratch/record.json")"
[[ $(raw_bytes "$scratch/stderr") == 0 ]] || fail "raw control bytes on stderr: $(cat -v "$scratch/stderr")"
grep -qF '\e[32mPASS\e[0m\rcudaagent-verify: forged\x07\u{009B}2J' "$scratch/stderr" ||
  fail "the visible form is missing: $(cat -v "$scratch/stderr")"
grep -qF "'$scratch/ws\\e[2J\\e]0;owned\\x07'" "$scratch/stderr" ||
  fail "the workspace's name is not shown escaped: $(cat -v "$scratch/stderr")"
bad_lines=$(grep -vc '^cudaagent-verify: ' "$scratch/stderr" || true)
[[ $bad_lines == 0 ]] || fail "a message spans lines: $(cat -v "$scratch/stderr")"

"$bin/cudaagent-profile" --quiet --brief --device cpu --task "$base/model.py" --rounds 4 --round-ms 5 \
  --warmup-ms 50 --timeout 60 "$ws" >"$scratch/brief" 2>"$scratch/profile-stderr" ||
  fail "cudaagent-profile exited $?: $(cat -v "$scratch/profile-stderr")"
[[ $(raw_bytes "$scratch/brief") == 0 ]] || fail "raw control bytes in --brief: $(cat -v "$scratch/brief")"
grep -q '^verdict: FAIL_RUNTIME (.*\\e\[32mPASS' "$scratch/brief" || fail "--brief: $(cat -v "$scratch/brief")"
head -1 "$scratch/brief" | grep -qF 'ws\e[2J\e]0;owned\x07' || fail "--brief id: $(cat -v "$scratch/brief")"
echo ok
