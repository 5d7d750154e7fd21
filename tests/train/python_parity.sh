#!/usr/bin/env bash
# The C++ PPO update against the same update written in plain PyTorch
# (tests/gpu/train/ppo_update_reference.py, the GPU bench's Python side) on the same toy weights
# and trajectories, on the CPU in float32: the losses of every iteration agree, so the two
# implementations of the arithmetic (and the bench's comparison) are of the same computation.
# Needs a python3 with torch (Debian's python3-torch); exits 77 (skipped) without one.
source "$(dirname "$0")/lib.sh" "$1"
python=
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import torch' 2>/dev/null; then python=$candidate && break; fi
done
[[ -n $python ]] || { echo "SKIP: no python3 with torch"; exit 77; }
root=$(cd "$here/../.." && pwd)
trajectories save-toy --model toy:vocab=16,seed=4 --out "$scratch/model"
trajectories random --rows 24 --prompt 5 --response 12 --turns 2 --vocab 16 --seed 9 >"$scratch/data.jsonl"
sizes=(--batch-size 8 --mini-batch-size 4 --micro-batch-size 3 --actor-lr 1e-2 --critic-lr 1e-2)
train ppo --run "$scratch/run" --actor "$scratch/model" --critic "$scratch/model" --old-log-probs recompute \
  --threads 1 -q "${sizes[@]}" "$scratch/data.jsonl" >"$scratch/cpp.jsonl"
PYTHONPATH=$here/toy_transformers "$python" "$root/tests/gpu/train/ppo_update_reference.py" train \
  --model "$scratch/model" --data "$scratch/data.jsonl" --device cpu --precision fp32 "${sizes[@]}" \
  >"$scratch/python.jsonl"
[[ $(wc -l <"$scratch/python.jsonl") == 3 && $(wc -l <"$scratch/cpp.jsonl") == 3 ]] || fail "expected 3 iterations each"
jq -s -e --slurpfile py "$scratch/python.jsonl" '
  def close(a; b): ((a - b) | fabs) <= 1e-4 * ([(a | fabs), (b | fabs), 1e-3] | max);
  [range(3) as $i | close(.[$i]["actor/pg_loss"]; $py[$i].pg_loss) and
                    close(.[$i]["critic/vf_loss"]; $py[$i].vf_loss)] | all' "$scratch/cpp.jsonl" >/dev/null || {
  paste <(jq -c '[.["actor/pg_loss"], .["critic/vf_loss"]]' "$scratch/cpp.jsonl") \
        <(jq -c '[.pg_loss, .vf_loss]' "$scratch/python.jsonl") >&2
  fail "the C++ and Python losses differ"
}
# The losses moved between iterations (the comparison is not of constants).
jq -s -e '.[0]["critic/vf_loss"] != .[2]["critic/vf_loss"]' "$scratch/cpp.jsonl" >/dev/null || fail "constant losses"
paste <(jq -c "[.[\"actor/pg_loss\"], .[\"critic/vf_loss\"]]" "$scratch/cpp.jsonl") <(jq -c "[.pg_loss, .vf_loss]" "$scratch/python.jsonl")
echo ok
