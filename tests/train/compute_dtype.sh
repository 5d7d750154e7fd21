#!/usr/bin/env bash
# --compute-dtype: rft, value and ppo run on the tiny Qwen2 fixture with bfloat16 products and
# still write float32 checkpoints; the dtype is recorded in state.json and in every metrics
# record; a resumed run keeps it (auto does not switch it, an explicit other dtype is refused);
# auto is float32 on the CPU; the toy model refuses bfloat16. (That bfloat16 moves the model as
# float32 does is the unit test's: tests/unit/train/rl_causal_lm.cpp.)
source "$(dirname "$0")/lib.sh" "$1"
fixture=tests/fixtures/train/qwen2-tiny
trajectories random --rows 8 --prompt 4 --response 6 --vocab 2050 --seed 5 >"$scratch/t.jsonl"
flags=(--batch-size 4 --micro-batch-size 2 --threads 1 -q)

# Every tensor of a safetensors file is F32 (the header is an 8-byte length and JSON).
all_f32() {
  python3 - "$1" <<'PY' || fail "$1 holds tensors that are not float32"
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
dtypes = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
sys.exit(0 if dtypes == {"F32"} else 1)
PY
}
# The compute dtype in a run's newest state.json, and perf/compute_bfloat16 of its records.
state_dtype() { jq -r .compute_dtype "$(latest "$1")/state.json"; }
bf16_flags() { jq -s -c 'map(.["perf/compute_bfloat16"])' "$1/metrics.jsonl"; }

train rft --run "$scratch/rft" --model "$fixture" --lr 1e-3 --compute-dtype bfloat16 "${flags[@]}" \
  "$scratch/t.jsonl" >/dev/null || fail "rft in bfloat16 exited $?"
train value --run "$scratch/value" --critic "$fixture" --lr 1e-3 --compute-dtype bfloat16 "${flags[@]}" \
  "$scratch/t.jsonl" >/dev/null || fail "value in bfloat16 exited $?"
train ppo --run "$scratch/ppo" --actor "$fixture" --critic "$fixture" --old-log-probs recompute \
  --kl-loss-coef 0.01 --actor-lr 1e-3 --compute-dtype bfloat16 --stop-after 1 "${flags[@]}" \
  "$scratch/t.jsonl" >/dev/null || fail "ppo in bfloat16 exited $?"
for run in rft value ppo; do
  [[ $(state_dtype "$scratch/$run") == bfloat16 ]] || fail "$run: state.json does not record bfloat16"
done
[[ $(bf16_flags "$scratch/rft") == "[1,1]" ]] || fail "rft metrics: $(bf16_flags "$scratch/rft")"
[[ $(bf16_flags "$scratch/ppo") == "[1]" ]] || fail "ppo metrics: $(bf16_flags "$scratch/ppo")"
all_f32 "$(latest "$scratch/rft")/actor/model.safetensors"
all_f32 "$(latest "$scratch/value")/critic/model.safetensors"
all_f32 "$(latest "$scratch/value")/critic/value_head.safetensors"
all_f32 "$(latest "$scratch/ppo")/actor/model.safetensors"
all_f32 "$(latest "$scratch/ppo")/critic/model.safetensors"
jq -e '.torch_dtype // .dtype | . == "float32"' "$(latest "$scratch/ppo")/actor/config.json" >/dev/null ||
  fail "the saved actor's config.json does not say float32"

# Resumed with auto (float32 on the CPU for a new run), the run stays in bfloat16; an explicit
# float32 is refused and leaves the run as it was.
code=0
train ppo --run "$scratch/ppo" --actor "$fixture" --critic "$fixture" --old-log-probs recompute \
  --kl-loss-coef 0.01 --actor-lr 1e-3 --compute-dtype float32 "${flags[@]}" "$scratch/t.jsonl" \
  >/dev/null 2>"$scratch/refused.err" || code=$?
[[ $code == 1 ]] || fail "resuming a bfloat16 run in float32 exited $code, expected 1"
grep -q "bfloat16" "$scratch/refused.err" || fail "the refusal does not name the run's dtype"
train ppo --run "$scratch/ppo" --actor "$fixture" --critic "$fixture" --old-log-probs recompute \
  --kl-loss-coef 0.01 --actor-lr 1e-3 "${flags[@]}" "$scratch/t.jsonl" >/dev/null ||
  fail "resuming with auto exited $?"
[[ $(state_dtype "$scratch/ppo") == bfloat16 ]] || fail "the resumed run changed its dtype"
[[ $(bf16_flags "$scratch/ppo") == "[1,1]" ]] || fail "resumed ppo metrics: $(bf16_flags "$scratch/ppo")"

# auto on the CPU is float32.
train rft --run "$scratch/auto" --model "$fixture" --lr 1e-3 --stop-after 1 "${flags[@]}" \
  "$scratch/t.jsonl" >/dev/null || fail "rft with auto exited $?"
[[ $(state_dtype "$scratch/auto") == float32 ]] || fail "auto on the CPU is not float32"
[[ $(bf16_flags "$scratch/auto") == "[0]" ]] || fail "auto metrics: $(bf16_flags "$scratch/auto")"

# The toy model computes in float32 only.
code=0
train rft --run "$scratch/toy" --model toy:vocab=2050 --compute-dtype bfloat16 "${flags[@]}" \
  "$scratch/t.jsonl" >/dev/null 2>"$scratch/toy.err" || code=$?
[[ $code == 1 ]] || fail "the toy model in bfloat16 exited $code, expected 1"
grep -q "float32 only" "$scratch/toy.err" || fail "the toy's refusal: $(cat "$scratch/toy.err")"
echo ok
