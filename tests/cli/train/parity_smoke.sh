#!/usr/bin/env bash
# The GPU parity script (tests/gpu/train/parity.sh) in its CPU smoke mode, against the committed
# fixtures: keeps the script working between GPU runs, and repeats the fixture gates end to end.
source "$(dirname "$0")/../lib.sh"
bin=$1
PARITY_SMOKE=1 bash tests/gpu/train/parity.sh "$scratch/out" "$bin" >"$scratch/log" 2>&1 || {
  cat "$scratch/log" >&2
  fail "parity.sh smoke run failed"
}
grep -q '^| serve greedy vs HF generate fp32 (fixtures) | 3/3 identical' "$scratch/out/results.md" ||
  fail "no greedy row in results.md: $(cat "$scratch/out/results.md")"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["logprobs_float32"]["max"] < 1e-4, r' \
  "$scratch/out/results.json" || fail "results.json lacks the fp32 log-prob parity"
echo ok
