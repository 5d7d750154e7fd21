#!/usr/bin/env bash
# The learning loop through files, as a real run goes (12 rounds): sample episodes from the newest actor
# checkpoint (multi-turn, observation tokens between turns), train one PPO iteration on them,
# repeat. Every iteration's first minibatch is on-policy (ratio 1, nothing clipped), because the
# checkpoint reloads exactly; the pattern reward rises.
source "$(dirname "$0")/lib.sh" "$1"
flags=(--actor toy:vocab=8,seed=7 --critic toy:vocab=8,seed=7 --batch-size 32 --mini-batch-size 16
       --actor-lr 1e-2 --critic-lr 1e-2 --weight-decay 0 --threads 1 -q)
run=$scratch/run
actor=toy:vocab=8,seed=7
for i in $(seq 1 12); do
  trajectories toy --model "$actor" --rows 32 --turns 2 --model-tokens 4 --seed "$i" >"$scratch/batch.jsonl"
  train ppo --run "$run" "${flags[@]}" "$scratch/batch.jsonl" >/dev/null
  actor=$(latest "$run")/actor
done
[[ $(wc -l <"$run/metrics.jsonl") == 12 ]] || fail "expected 12 iterations"
jq -e -s 'all(.[]; .["actor/first_minibatch/ratio_max_deviation"] < 1e-5
                   and .["actor/first_minibatch/pg_clipfrac"] == 0)' "$run/metrics.jsonl" >/dev/null ||
  fail "a first minibatch was not on-policy"
first=$(jq -s '[.[0:3][]["critic/score/mean"]] | add / length' "$run/metrics.jsonl")
last=$(jq -s '[.[-3:][]["critic/score/mean"]] | add / length' "$run/metrics.jsonl")
echo "reward: first 3 iterations $first, last 3 $last"
jq -n -e "$last > $first + 0.3" >/dev/null || fail "the reward did not rise ($first -> $last)"
echo ok
