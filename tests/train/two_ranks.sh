#!/usr/bin/env bash
# Data parallelism as srun starts it: two CPU ranks from SLURM_PROCID / SLURM_NTASKS / MASTER_ADDR /
# MASTER_PORT over Gloo reach the models one process reaches (to float rounding: the summation
# order differs), each rank keeps half the optimiser state (ZeRO-1), and rank 0 alone writes
# metrics.
source "$(dirname "$0")/lib.sh" "$1"
trajectories toy --rows 48 --turns 2 --model-tokens 3 --seed 8 >"$scratch/data.jsonl"
flags=(--actor toy:vocab=8,seed=7 --critic toy:vocab=8,seed=7 --batch-size 16 --mini-batch-size 8
       --micro-batch-size 3 --actor-lr 1e-2 --critic-lr 1e-2 --threads 1 --save-every 1 -q)
train ppo --run "$scratch/one" "${flags[@]}" "$scratch/data.jsonl" >"$scratch/one.out"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for rank in 0 1; do
  SLURM_PROCID=$rank SLURM_NTASKS=2 SLURM_LOCALID=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$bin/cudaagent-train" ppo --run "$scratch/two" "${flags[@]}" --dist-timeout 120 \
    "$scratch/data.jsonl" >"$scratch/rank$rank.out" 2>"$scratch/rank$rank.err" &
  pids+=($!)
done
for rank in 0 1; do
  wait "${pids[$rank]}" || fail "rank $rank exited $?: $(cat "$scratch/rank$rank.err")"
done
[[ $(wc -l <"$scratch/rank0.out") == 3 ]] || fail "rank 0 should write 3 metrics records"
[[ ! -s $scratch/rank1.out ]] || fail "rank 1 wrote records"
one=$(latest "$scratch/one")
two=$(latest "$scratch/two")
for model in actor critic; do
  python3 "$here/compare_tensors.py" "$one/$model/model.safetensors" "$two/$model/model.safetensors" \
    --rtol 1e-3 --atol 1e-5 || fail "$model differs between one and two ranks"
done
# The last iteration moved the actor by more than the tolerance, so the comparison means something.
python3 "$here/compare_tensors.py" "$one/actor/model.safetensors" \
  "$scratch/one/checkpoints/iter-00000002/actor/model.safetensors" --rtol 1e-3 --atol 1e-5 >/dev/null &&
  fail "the actor did not move in the last iteration"
# ZeRO-1: each rank's optimiser file holds a share of the moments, together all of them.
count() { python3 -c 'import json, struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]
print(len([k for k in json.loads(d[8:8 + n]) if k != "__metadata__"]))' "$1"; }
whole=$(count "$one/optim-actor.rank-0-of-1.safetensors")
first=$(count "$two/optim-actor.rank-0-of-2.safetensors")
second=$(count "$two/optim-actor.rank-1-of-2.safetensors")
((first > 0 && second > 0 && first + second == whole)) || fail "optimiser shards $first + $second != $whole"
jq -e -s --slurpfile one "$scratch/one.out" \
  '[.[]["critic/score/mean"]] == [$one[]["critic/score/mean"]]' "$scratch/rank0.out" >/dev/null ||
  fail "the ranks saw other batches than one process"
echo ok
