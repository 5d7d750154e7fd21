#!/usr/bin/env bash
# --prompt-mode ids: after the first turn, each prompt goes to /v1/completions as the exact ids of
# the conversation so far (the last prompt and sampled reply, then what the server's template adds
# for the tool results, from /tokenize), so the trajectory is exact even against a server whose
# template re-renders earlier replies (where --prompt-mode messages records drift); a server
# without those endpoints falls back to messages, turn by turn, and says why.
source "$(dirname "$0")/../lib.sh"
bin=$1
source "$(dirname "$0")/lib.bash"

start_server short.jsonl
run --endpoint "$url" --model m --prompt-mode ids "$task"
[[ $code == 0 && $(q .trajectory.finish_reason) == stop ]] || fail "ids: exit $code, $(q .trajectory.finish_reason): $(cat "$scratch/err")"
[[ $(q .trajectory.tokens.status) == exact ]] || fail "ids: tokens $(q .trajectory.tokens.status)"
[[ $(q '[.trajectory.turns[] | .token_prompt // false] | map(tostring) | join(",")') == false,true,true ]] ||
  fail "ids: $(q '[.trajectory.turns[] | {token_prompt, note}]')"
[[ $(q .trajectory.policy) == "server (token prompts)" ]] || fail "ids: policy $(q .trajectory.policy)"
[[ $(q '.trajectory.messages[3].role') == tool && $(q '.trajectory.messages[2].tool_calls[0].function.name') == Read ]] ||
  fail "ids: results are not tool messages after a reply with its calls"
[[ $(jq -r .path "$log" | paste -sd,) == "/v1/chat/completions,/tokenize,/tokenize,/v1/completions,/tokenize,/tokenize,/v1/completions" ]] ||
  fail "ids: requests $(jq -r .path "$log" | paste -sd,)"
head -1 "$scratch/out" | python3 -c '
import base64, json, struct, sys
r = json.loads(sys.stdin.readline())
t = r["trajectory"]["tokens"]
u32 = lambda s: list(struct.unpack("<%dI" % (len(base64.b64decode(s)) // 4), base64.b64decode(s)))
ids = u32(t["prompt_ids"]) + u32(t["response_ids"])
text = bytes(i for i in ids if i < 256).decode()
assert "Nothing to do." in text and "echo hello" in text and "hello\n" in text, text[-300:]
' || fail "ids: the sequence is not the conversation"

# A template that re-renders earlier replies: drift with messages, exact with ids.
start_server short.jsonl --drift
run --endpoint "$url" --model m --prompt-mode ids "$task"
[[ $(q .trajectory.tokens.status) == exact ]] || fail "drift server, ids: $(q .trajectory.tokens.status)"

# No token-in endpoints: every turn goes as messages, with the reason noted.
start_server short.jsonl --no-token-in
run --endpoint "$url" --model m --prompt-mode ids "$task"
[[ $code == 0 && $(q .trajectory.finish_reason) == stop ]] || fail "no token-in: $(q .trajectory.finish_reason)"
[[ $(q '[.trajectory.turns[] | .token_prompt // false] | any') == false ]] || fail "no token-in: a turn went as ids"
q '.trajectory.turns[1].note' | grep -q "/tokenize.*HTTP 404" || fail "no token-in: note $(q .trajectory.turns[1].note)"
[[ $(q .trajectory.tokens.status) == exact ]] || fail "no token-in: tokens $(q .trajectory.tokens.status)"

code=0; "$rollout" --device cpu --policy "replay:$scratch/short.jsonl" --prompt-mode ids "$task" >/dev/null 2>"$scratch/err" || code=$?
[[ $code == 1 ]] && grep -q "needs a server" "$scratch/err" || fail "ids with a replay: exit $code"
echo "ok"
