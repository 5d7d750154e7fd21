#!/usr/bin/env bash
# An honest episode on the CPU example against the scripted server, with token ids: the agent reads
# the task, writes kernel, binding and model_new.py, compiles, verifies and profiles through the
# workspace's shims, and stops. The record: a positive reward, the evaluations it asked for, the
# kernels it left, and a token-exact sequence whose loss mask covers exactly the model's replies.
# Two episodes at once: when one ends, the evaluations of the other must not
# find the evaluator's warm workers dead with the first episode's threads. The first run in a build
# tree precompiles torch's header (about a minute).
source "$(dirname "$0")/../lib.sh"
bin=$1
source "$(dirname "$0")/lib.bash"

start_server honest.jsonl
run --endpoint "$url" --model scripted-model --temperature 0.7 --seed 5 --episodes-per-task 2 --jobs 2 "$task"
[[ $code == 0 ]] || fail "exit $code: $(cat "$scratch/err")"
[[ $(wc -l <"$scratch/out") == 2 ]] || fail "expected two records: $(cat "$scratch/out")"
[[ $(jq -r '[.trajectory.evaluations[].exit_code] | map(tostring) | join(",")' "$scratch/out" | sort -u) == "0,0,0" ]] ||
  fail "an evaluation failed: $(jq -c '.trajectory.evaluations' "$scratch/out")"
[[ $(jq -r .candidate.files[\"model_new.py\"] "$scratch/out" | sort -u | grep -c '^# [0-9a-f]\{12\}$') == 2 ]] ||
  fail "the two episodes did not write two candidates"
[[ $(q .verify.verdict) == PASS ]] || fail "verify: $(q .verify.reason)"
[[ $(q .profile.verdict) == PASS ]] || fail "profile: $(q .profile.reason)"
[[ $(q '.reward.value > 0') == true ]] || fail "reward: $(q .reward)"
[[ $(q .trajectory.finish_reason) == stop ]] || fail "finish: $(q .trajectory.finish_reason)"
[[ $(q .trajectory.turns_used) == 6 && $(q .trajectory.tool_errors) == 0 ]] || fail "turns/errors: $(q '.trajectory | [.turns_used, .tool_errors]')"
[[ $(q '[.trajectory.evaluations[] | "\(.op):\(.exit_code)"] | join(",")') == "compile:0,verify:0,profile:0" ]] ||
  fail "evaluations: $(q .trajectory.evaluations)"
q '.trajectory.messages[] | select(.role == "tool") | .content' >"$scratch/tool-text"
grep -q "compile: built cuda_extension" "$scratch/tool-text" || fail "the compile shim's output is missing"
grep -q "^verification: PASS" "$scratch/tool-text" || fail "the verification shim's output is missing"
grep -q "^profiling: PASS" "$scratch/tool-text" && grep -q "speedup over eager" "$scratch/tool-text" ||
  fail "the profiling shim's output is missing"
# The kernels the agent left, byte for byte, so the record can be verified again.
[[ $(q '.candidate.files | keys | join(",")') == "kernels/bias_relu.cpp,kernels/bias_relu_binding.cpp,model_new.py" ]] ||
  fail "candidate files: $(q '.candidate.files | keys')"
[[ $(q '.candidate.files["model_new.py"]' | sed '/^# [0-9a-f]\{12\}$/d') == "$(cat "$example/model_new.py")" ]] || fail "model_new.py differs"
# The request: tools, sampling, vLLM's token fields, the skill document in the system prompt.
python3 - "$log" <<'P' || fail "the requests were not what the server should get"
import json, sys
first = json.loads(open(sys.argv[1]).readline())["body"]
assert first["model"] == "scripted-model" and first["temperature"] == 0.7, first
assert isinstance(first["seed"], int) and first["return_token_ids"] and first["logprobs"], first
assert [t["function"]["name"] for t in first["tools"]] == ["Bash", "Read", "Write", "Edit", "MultiEdit",
                                                           "Glob", "Grep", "BashOutput", "KillBash"]
assert "python3 -m utils.verification" in first["messages"][0]["content"]
assert first["messages"][1]["role"] == "user" and "model.py" in first["messages"][1]["content"]
P
# Tokens: exact, and the byte-level ids decode back to the conversation; mask 1 on model replies.
head -1 "$scratch/out" | python3 -c '
import base64, json, struct, sys
r = json.loads(sys.stdin.readline())
t = r["trajectory"]["tokens"]
assert t["status"] == "exact", t["status"]
u32 = lambda s: list(struct.unpack("<%dI" % (len(base64.b64decode(s)) // 4), base64.b64decode(s)))
prompt, resp = u32(t["prompt_ids"]), u32(t["response_ids"])
mask = list(base64.b64decode(t["loss_mask"]))
raw = base64.b64decode(t["logprobs"]); lp = struct.unpack("<%df" % (len(raw) // 4), raw)
assert len(resp) == len(mask) == len(lp) == t["response_count"] and len(prompt) == t["prompt_count"]
text = lambda ids: bytes(i for i in ids if i < 256).decode()
model = [text([i for i, m in zip(resp[s["start"]:s["start"] + s["length"]], mask[s["start"]:]) if m])
         for s in t["segments"] if s["kind"] == "model"]
msgs = r["trajectory"]["messages"]
for seg, got in zip([s for s in t["segments"] if s["kind"] == "model"], model):
    content = msgs[seg["messages"][0]]["content"]
    assert got.startswith(content), (got[:80], content[:80])
assert sum(mask) == sum(s["length"] for s in t["segments"] if s["kind"] == "model")
assert all(l == -0.25 for l, m in zip(lp, mask) if m) and all(l == 0 for l, m in zip(lp, mask) if not m)
assert "You are an expert" in text(prompt)
' || fail "the token arrays do not match the conversation"
[[ $(q .trajectory.server.system_fingerprint) == scripted-1 ]] || fail "server facts missing"
# The record is a record like verify's and reward's: cudaagent-reward scores it again the same way.
"$bin/cudaagent-reward" --quiet "$scratch/out" >"$scratch/rescored" || fail "cudaagent-reward failed"
[[ $(jq -r .reward.value "$scratch/rescored" | paste -sd,) == $(jq -r .reward.value "$scratch/out" | paste -sd,) ]] || fail "reward differs when re-scored"
# And cudaagent-verify judges it as the episode's evaluator did (both are cudaagent::Verifier): the
# same verdict, snapshot of the candidate and settings.
head -1 "$scratch/out" | "$bin/cudaagent-verify" --quiet --device cpu >"$scratch/reverified" ||
  fail "cudaagent-verify failed on the record"
for key in verdict snapshot settings device; do
  [[ $(jq -c ".verify.$key" "$scratch/reverified") == $(q ".verify.$key | tojson") ]] ||
    fail "verify.$key differs: $(jq -c ".verify.$key" "$scratch/reverified") vs $(q ".verify.$key | tojson")"
done
echo "ok"
