#!/usr/bin/env bash
# PPO on the tiny Qwen2 fixture end to end: the run writes actor and critic checkpoints in the
# Hugging Face layout (safetensors, config.json, tokenizer files; the critic's value head beside
# them), and a running `serve` reloads the actor PPO wrote and answers with its new weights.
source "$(dirname "$0")/lib.sh" "$1"
fixture=tests/fixtures/train/qwen2-tiny
trajectories random --rows 4 --prompt 4 --response 6 --vocab 2050 --seed 5 >"$scratch/t.jsonl"
train ppo --run "$scratch/run" --actor "$fixture" --critic "$fixture" --old-log-probs recompute \
  --actor-lr 1e-3 --batch-size 4 --threads 1 -q "$scratch/t.jsonl" >"$scratch/ppo.out" ||
  fail "ppo on the Qwen2 fixture exited $?"
jq -e -s 'map(select(.stage == "ppo")) | length == 1' "$scratch/ppo.out" >/dev/null ||
  fail "expected one ppo metrics record: $(cat "$scratch/ppo.out")"
checkpoint=$(latest "$scratch/run")
for file in actor/config.json actor/model.safetensors actor/tokenizer.json critic/model.safetensors \
  critic/value_head.safetensors; do
  [[ -f $checkpoint/$file ]] || fail "the checkpoint lacks $file"
done

"$bin/cudaagent-train" serve "$fixture" --port 0 --max-num-seqs 2 --max-model-len 256 \
  >"$scratch/serve.out" 2>"$scratch/serve.err" &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$scratch"' EXIT
for _ in $(seq 600); do
  [[ -s $scratch/serve.out ]] && break
  kill -0 "$server" 2>/dev/null || { cat "$scratch/serve.err" >&2; fail "serve exited before listening"; }
  sleep 0.1
done
url=$(jq -r .serve.url "$scratch/serve.out")
python3 - "$url" "$checkpoint/actor" <<'EOF' || fail "serve did not switch to the PPO checkpoint"
import json, sys, urllib.request
base, actor = sys.argv[1], sys.argv[2]
def call(path, body):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)
def logprobs():
    body = call("/chat/completions", {"model": "qwen2-tiny", "prompt_token_ids": [11, 12, 13, 14], "temperature": 0,
                                                               "max_tokens": 4, "ignore_eos": True, "logprobs": True})
    return [t["logprob"] for t in body["choices"][0]["logprobs"]["content"]]
before = logprobs()
reloaded = call("/reload", {"checkpoint": actor})
assert reloaded["weights_version"] == 2, reloaded
after = logprobs()
assert before != after, f"the same log-probs after the reload: {before}"
EOF
echo ok
