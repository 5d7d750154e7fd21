#!/usr/bin/env bash
# A torch fallback: model_new.py calls torch instead of its kernel. The verification shim tells the
# agent why (a policy finding); the final verdict is REJECT_POLICY and the reward -1. The server
# speaks the <tool_call> text protocol here (no tool parsing), so the calls come from the text.
source "$(dirname "$0")/../lib.sh"
bin=$1
source "$(dirname "$0")/lib.bash"

start_server fallback.jsonl --text
run --endpoint "$url" --model m --tool-protocol text "$task"
[[ $code == 0 ]] || fail "exit $code: $(cat "$scratch/err")"
[[ $(q .verify.verdict) == REJECT_POLICY ]] || fail "verdict: $(q .verify.verdict) ($(q .verify.reason))"
[[ $(q .reward.value) == -1 ]] || fail "reward: $(q .reward)"
[[ $(q 'has("profile")') == false ]] || fail "a rejected candidate was profiled"
[[ $(q .trajectory.tool_protocol) == text && $(q '[.trajectory.turns[] | select(.text_protocol)] | length') == 3 ]] ||
  fail "the calls were not read from the text: $(q .trajectory.turns)"
# Text protocol: no tools in the request, their description in the system prompt, results as user messages.
python3 - "$log" <<'P' || fail "text-protocol requests are wrong"
import json, sys
bodies = [json.loads(l)["body"] for l in open(sys.argv[1])]
assert all("tools" not in b for b in bodies)
assert "<tool_call>" in bodies[0]["messages"][0]["content"] and '"name":"Bash"' in bodies[0]["messages"][0]["content"]
last = bodies[-1]["messages"]
assert last[-1]["role"] == "user" and last[-1]["content"].startswith("<tool_response>\n[Bash]\n"), last[-1]
assert "verification: REJECT_POLICY" in last[-1]["content"] and "relu" in last[-1]["content"], last[-1]
P
[[ $(q .trajectory.tokens.status) == exact ]] || fail "tokens: $(q .trajectory.tokens.status)"
echo "ok"
