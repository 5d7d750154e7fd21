#!/usr/bin/env bash
# The episode's limits: turns (a model that never stops), context tokens (max_tokens is lowered as
# the context fills, then the episode ends), wall time, and the evaluation budget. Each ends the
# episode with its own finish reason, and the record is still written and scored.
source "$(dirname "$0")/../lib.sh"
bin=$1
source "$(dirname "$0")/lib.bash"

run --policy "replay:$scratch/loop.jsonl" --max-turns 5 "$task"
[[ $code == 0 ]] || fail "turns: exit $code: $(cat "$scratch/err")"
[[ $(q .trajectory.finish_reason) == max_turns && $(q .trajectory.turns_used) == 5 ]] ||
  fail "turns: $(q '.trajectory | [.finish_reason, .turns_used]')"
[[ $(q .reward.value) == -1 ]] || fail "turns: the empty workspace was not scored"

start_server loop.jsonl
# The first prompt (share/skill/SKILL.md and the task) must leave the full 4096 and the second not:
# 7400 keeps a few hundred tokens of room for the skill document to grow.
run --endpoint "$url" --model m --max-context-tokens 7400 --max-tokens 4096 "$task"
[[ $code == 0 ]] || fail "context: exit $code: $(cat "$scratch/err")"
[[ $(q .trajectory.finish_reason) == context_limit ]] || fail "context: $(q .trajectory.finish_reason)"
python3 - "$log" <<'P' || fail "context: max_tokens was not lowered to the room left"
import json, sys
bodies = [json.loads(l)["body"] for l in open(sys.argv[1])]
assert bodies[0]["max_tokens"] == 4096
assert all(b["max_tokens"] < 4096 for b in bodies[1:]) and len(bodies) >= 2, [b["max_tokens"] for b in bodies]
P

run --policy "replay:$scratch/sleepy.jsonl" --max-seconds 1 "$task"
[[ $code == 0 && $(q .trajectory.finish_reason) == wall_time ]] || fail "wall time: $(q .trajectory.finish_reason)"
(( $(q .trajectory.turns_used) < 50 )) || fail "wall time: every turn ran"

run --policy "replay:$scratch/evals.jsonl" --max-evaluations 1 "$task"
[[ $code == 0 ]] || fail "budget: exit $code"
[[ $(q '[.trajectory.evaluations[].exit_code] | map(tostring) | join(",")') == "1,3" ]] ||
  fail "budget: $(q .trajectory.evaluations)"
q '.trajectory.messages[] | select(.role == "tool") | .content' | grep -q "used all 1 of its evaluations" ||
  fail "budget: the agent was not told"
echo "ok"
