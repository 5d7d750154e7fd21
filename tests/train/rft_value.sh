#!/usr/bin/env bash
# rft keeps positive trajectories without invalid tool calls or tool-call loops (each filter can be
# relaxed) and fits them; unusable records become error records on stdout; value pre-training
# fits the returns, and its critic starts a PPO run.
source "$(dirname "$0")/lib.sh" "$1"
trajectories toy --rows 8 --seed 2 >"$scratch/base.jsonl"
calls_ok='[{"tool_calls":[{"name":"Read","arguments":{"file_path":"a"},"ok":true},{"name":"Edit","arguments":{},"ok":true}]}]'
calls_bad='[{"tool_calls":[{"name":"Bash","arguments":{"command":"x"},"error":"unknown tool"}]}]'
calls_loop='[{"tool_calls":[{"name":"Read","arguments":{"file_path":"a"}},{"name":"Read","arguments":{"file_path":"a"}},{"name":"Read","arguments":{"file_path":"a"}}]}]'
jq -c --argjson ok "$calls_ok" --argjson bad "$calls_bad" --argjson loop "$calls_loop" '
  (.id | ltrimstr("t") | tonumber) as $n
  | .trajectory.response_ids = [range(.trajectory.prompt_ids[-1] + 1; .trajectory.prompt_ids[-1] + 7)
                                 | . % 8]
  | .trajectory.turns = (if $n == 1 then $bad elif $n == 2 then $loop else $ok end)
  | .reward.value = (if $n == 3 then 0 else 1 end)' "$scratch/base.jsonl" >"$scratch/rft.jsonl"
echo 'not json' >>"$scratch/rft.jsonl"
echo '{"id":"short","trajectory":{"prompt_ids":[1],"response_ids":[2,3],"loss_mask":[1]},"reward":{"value":1}}' >>"$scratch/rft.jsonl"

rft() { train rft --model toy:vocab=8,seed=7 --lr 1e-2 --batch-size 8 --threads 1 "$@" "$scratch/rft.jsonl"; }
rft --run "$scratch/rft" --epochs 20 >"$scratch/rft.out" 2>"$scratch/rft.err"
grep -q "5 trajectories to train on, 2 unusable, 1 dropped (invalid tool call), 1 dropped (reward), 1 dropped (tool-call loop)" \
  "$scratch/rft.err" || fail "rft summary: $(cat "$scratch/rft.err")"
[[ $(jq -s 'map(select(.error)) | length' "$scratch/rft.out") == 2 ]] || fail "expected 2 error records"
jq -e -s 'map(select(.error.id == "short"))[0].error.reason | test("loss_mask has 1 entries")' \
  "$scratch/rft.out" >/dev/null || fail "the short record's error record"
jq -e -s 'map(select(.stage))[0]["batch/trajectories"] == 5' "$scratch/rft.out" >/dev/null || fail "rft batch size"
jq -e -s 'map(select(.stage)) | (.[-1]["rft/loss"] < 0.2 * .[0]["rft/loss"])' "$scratch/rft.out" >/dev/null ||
  fail "rft did not fit the kept trajectories"
[[ -d $(latest "$scratch/rft")/actor ]] || fail "rft checkpoint lacks the model"
rft --run "$scratch/relaxed" -q --keep-invalid-calls --max-identical-calls 0 --min-reward -1 --stop-after 1 >"$scratch/relaxed.out"
jq -e -s 'map(select(.stage))[0]["batch/trajectories"] == 8' "$scratch/relaxed.out" >/dev/null ||
  fail "relaxed filters should keep all 8"

trajectories toy --rows 32 --turns 2 --seed 3 >"$scratch/value.jsonl"
train value --run "$scratch/value" --critic toy:vocab=8,seed=7 --lr 1e-2 --epochs 30 --batch-size 32 \
  --threads 1 -q "$scratch/value.jsonl" >"$scratch/value.out"
jq -e -s '.[-1]["critic/vf_loss"] < 0.5 * .[0]["critic/vf_loss"]' "$scratch/value.out" >/dev/null ||
  fail "value pre-training did not reduce the value loss"
critic=$(latest "$scratch/value")/critic
train ppo --run "$scratch/ppo" --actor toy:vocab=8,seed=7 --critic "$critic" --threads 1 -q --stop-after 1 \
  "$scratch/value.jsonl" >"$scratch/ppo.out"
jq -e '.["critic/values/mean"] != 0' "$scratch/ppo.out" >/dev/null || fail "ppo did not start from the trained critic"
echo ok
