#!/usr/bin/env bash
# Servers that misbehave: 500s that stop (retried, the episode goes on), 500s that do not (the
# episode ends with model_error and is still scored), nothing listening, a server that refuses
# vLLM's token fields (asked again without them: text-only), one that returns no ids, one whose
# template re-renders earlier replies (drift), and --no-token-ids.
source "$(dirname "$0")/../lib.sh"
bin=$1
source "$(dirname "$0")/lib.bash"

start_server short.jsonl --fail 2
run --endpoint "$url" --model m --backoff 0.05 "$task"
[[ $code == 0 && $(q .trajectory.finish_reason) == stop ]] || fail "flaky: exit $code, $(q .trajectory.finish_reason)"
[[ $(q .trajectory.turns[0].tries) == 3 ]] || fail "flaky: tries $(q .trajectory.turns[0].tries)"
grep -q "HTTP 500" "$scratch/err" && grep -q "retrying in" "$scratch/err" || fail "flaky: no retry warning"
[[ $(q .trajectory.tokens.status) == exact ]] || fail "flaky: tokens $(q .trajectory.tokens.status)"

start_server short.jsonl --fail 1000
run --endpoint "$url" --model m --retries 1 --backoff 0.05 "$task"
[[ $code == 0 ]] || fail "down: exit $code"
[[ $(q .trajectory.finish_reason) == model_error && $(q .trajectory.turns_used) == 0 ]] || fail "down: $(q .trajectory.finish_reason)"
q .trajectory.finish_detail | grep -q "HTTP 500" || fail "down: detail $(q .trajectory.finish_detail)"
[[ $(q .reward.value) == -1 ]] || fail "down: not scored"
stop_server
run --endpoint "$url" --model m --retries 1 --backoff 0.05 "$task"
[[ $code == 0 && $(q .trajectory.finish_reason) == model_error ]] || fail "closed port: $(q .trajectory.finish_reason)"

start_server short.jsonl --reject-token-fields
run --endpoint "$url" --model m "$task"
[[ $code == 0 && $(q .trajectory.finish_reason) == stop ]] || fail "refused fields: $(q .trajectory.finish_reason)"
[[ $(q .trajectory.tokens.status) == text_only ]] || fail "refused fields: $(q .trajectory.tokens.status)"
grep -q "refused vLLM's token fields" "$scratch/err" || fail "refused fields: no warning"
[[ $(jq -s '[.[].body | has("return_token_ids")] | map(tostring) | join(",")' "$log") == '"true,false,false,false"' ]] ||
  fail "refused fields: $(jq -c -s '[.[].body | has("return_token_ids")]' "$log")"

start_server short.jsonl --no-ids
run --endpoint "$url" --model m "$task"
[[ $(q .trajectory.tokens.status) == text_only && $(q .trajectory.tokens.response_ids) == null ]] ||
  fail "no ids: $(q .trajectory.tokens.status)"

start_server short.jsonl --drift
run --endpoint "$url" --model m --token-encoding json "$task"
[[ $(q .trajectory.tokens.status) == drift ]] || fail "drift: $(q .trajectory.tokens.status)"
[[ $(q '.trajectory.tokens.response_ids | type') == array ]] || fail "drift: --token-encoding json"

start_server short.jsonl
run --endpoint "$url" --model m --no-token-ids "$task"
[[ $(jq -s '[.[].body | has("return_token_ids") or has("logprobs")] | any' "$log") == false ]] ||
  fail "--no-token-ids: the fields were asked for"
echo "ok"
