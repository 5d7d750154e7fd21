#!/usr/bin/env bash
# Checkpoint and resume: a PPO run stopped and resumed (by --stop-after, and by SIGINT at an
# arbitrary moment) ends with the same models, optimiser state and metrics as an uninterrupted run.
source "$(dirname "$0")/lib.sh" "$1"
trajectories toy --rows 96 --turns 2 --model-tokens 3 --seed 4 >"$scratch/data.jsonl"
flags=(--actor toy:vocab=8,seed=7 --critic toy:vocab=8,seed=7 --batch-size 16 --mini-batch-size 8
       --micro-batch-size 3 --ppo-epochs 2 --shuffle-minibatches --actor-lr 1e-2 --critic-lr 1e-2
       --kl-loss-coef 0.01 --kl-coef 0.01 --kl-target 0.001 --threads 1 -q)

train ppo --run "$scratch/whole" "${flags[@]}" "$scratch/data.jsonl" >"$scratch/whole.out"
[[ $(wc -l <"$scratch/whole.out") == 6 ]] || fail "expected 6 metrics records on stdout"
cmp -s "$scratch/whole.out" "$scratch/whole/metrics.jsonl" || fail "stdout and metrics.jsonl differ"
[[ -s $scratch/whole/metrics.svg ]] || fail "no metrics.svg"

# Stopped after 1, then after 2 more, then to the end.
for _ in 1 2; do
  train ppo --run "$scratch/parts" "${flags[@]}" --stop-after 2 "$scratch/data.jsonl" >/dev/null
done
[[ $(wc -l <"$scratch/parts/metrics.jsonl") == 4 ]] || fail "expected 4 iterations after two stops"
train ppo --run "$scratch/parts" "${flags[@]}" "$scratch/data.jsonl" >/dev/null
cmp -s <(deterministic_metrics "$scratch/whole/metrics.jsonl") <(deterministic_metrics "$scratch/parts/metrics.jsonl") ||
  fail "resumed metrics differ from the uninterrupted run's"
same_checkpoint "$(latest "$scratch/whole")" "$(latest "$scratch/parts")"
# A finished run given the same data again does nothing more.
train ppo --run "$scratch/parts" "${flags[@]}" "$scratch/data.jsonl" >"$scratch/again.out"
[[ ! -s $scratch/again.out ]] || fail "a finished run trained again"

# Interrupted by SIGINT (the iteration it lands in is not fixed): exit 130, resume, same result.
# More data, so that the signal arrives while the run is still going.
trajectories toy --rows 480 --turns 2 --model-tokens 3 --seed 5 >"$scratch/big.jsonl"
train ppo --run "$scratch/big" "${flags[@]}" "$scratch/big.jsonl" >/dev/null
# The binary itself in the background: a shell function would run in a subshell that gets the signal.
"$bin/cudaagent-train" ppo --run "$scratch/signal" "${flags[@]}" --save-every 100 "$scratch/big.jsonl" >"$scratch/signal.out" &
pid=$!
for _ in $(seq 1 600); do
  [[ -s $scratch/signal.out ]] && break
  sleep 0.05
done
kill -INT "$pid"
code=0
wait "$pid" || code=$?
[[ $code == 130 ]] || fail "SIGINT exited $code, expected 130"
[[ -f $scratch/signal/checkpoints/latest ]] || fail "no checkpoint after SIGINT"
[[ $(wc -l <"$scratch/signal/metrics.jsonl") -lt 30 ]] || fail "the signal came after the last iteration"
train ppo --run "$scratch/signal" "${flags[@]}" "$scratch/big.jsonl" >/dev/null
cmp -s <(deterministic_metrics "$scratch/big/metrics.jsonl") <(deterministic_metrics "$scratch/signal/metrics.jsonl") ||
  fail "metrics after SIGINT and resume differ"
same_checkpoint "$(latest "$scratch/big")" "$(latest "$scratch/signal")"

# Another stage's run directory is refused.
code=0
train value --run "$scratch/whole" --critic toy:vocab=8 -q "$scratch/data.jsonl" >/dev/null 2>"$scratch/err" || code=$?
[[ $code == 1 ]] && grep -q "holds a ppo run" "$scratch/err" || fail "a ppo run directory was taken for value"
echo ok
