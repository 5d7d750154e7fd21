#!/usr/bin/env bash
# LLM mode against a scripted local server (llm_server.py): good proposals, a proposal naming an
# unknown operator (rejected with a reason, the run goes on), HTTP 500 then success (retried),
# a garbage body and a 404 (clear errors, exit 1), a reply without JSON (an error record), a
# server too slow for --timeout, and an endpoint where nothing listens.
source "$(dirname "$0")/../lib.sh"
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
synth=$bin/cudaagent-synth
server_pid=
stop_server() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  server_pid=
}
trap 'stop_server; rm -rf "$scratch"' EXIT

# Starts the server in MODE; sets $url and $log.
start_server() {
  stop_server
  rm -f "$scratch/port" "$scratch/requests.log"
  log=$scratch/requests.log
  touch "$log"
  python3 "$here/llm_server.py" "$1" "$scratch/port" "$log" &
  server_pid=$!
  for _ in $(seq 100); do [[ -s $scratch/port ]] && break; sleep 0.05; done
  [[ -s $scratch/port ]] || fail "the scripted server did not start"
  url=http://127.0.0.1:$(cat "$scratch/port")
}
requests() { wc -l <"$log" | tr -d ' '; }
run() {  # run ARGS...: stdout in $scratch/out, stderr in $scratch/err, exit code in $code
  code=0
  "$synth" --model scripted-model --backoff 0.05 "$@" >"$scratch/out" 2>"$scratch/err" || code=$?
}
tasks() { grep -c '"task"' "$scratch/out" || true; }
errors() { grep -c '"error"' "$scratch/out" || true; }

# Good proposals: three per reply, --count 5 takes two requests and stops.
start_server ok
run --endpoint "$url" --count 5 --seed 4 --per-request 3
[[ $code == 0 ]] || fail "ok: exit $code: $(cat "$scratch/err")"
[[ $(tasks) == 5 && $(errors) == 0 ]] || fail "ok: $(tasks) tasks, $(errors) errors"
[[ $(requests) == 2 ]] || fail "ok: $(requests) requests, expected 2"
grep -q '"composer":"llm","llm_model":"scripted-model"' "$scratch/out" || fail "ok: provenance missing"
grep -q '"ops":\["conv2d","batch_norm2d","relu"\]' "$scratch/out" || fail "ok: proposal not used"
grep -q 'negative_slope=0.1)' "$scratch/out" || fail "ok: the proposed parameter was not applied"
python3 - "$log" <<'P' || fail "ok: the request was not what the server should get"
import json, sys
first = json.loads(open(sys.argv[1]).readline())
assert first["path"] == "/v1/chat/completions", first["path"]
body = first["body"]
assert body["model"] == "scripted-model" and body["seed"] == 4, body
assert body["messages"][0]["role"] == "system" and "conv2d" in body["messages"][0]["content"]
assert "Propose 3 different compositions" in body["messages"][1]["content"]
assert first["auth"] is None
P
# The same run again gives the same tasks: proposals draw sizes from the seed.
cp "$scratch/out" "$scratch/first"
run --endpoint "$url/v1" --count 5 --seed 4 --per-request 3
cmp -s "$scratch/out" "$scratch/first" || fail "ok: a second run with the same seed differs"

# An API key from the environment, sent as a bearer token; a missing variable is an error.
CUDAAGENT_TEST_KEY=sekrit run --endpoint "$url" --count 1 --api-key-env CUDAAGENT_TEST_KEY
tail -1 "$log" | grep -q '"auth": "Bearer sekrit"' || fail "the API key was not sent"
run --endpoint "$url" --count 1 --api-key-env CUDAAGENT_NO_SUCH_VARIABLE
[[ $code == 1 ]] && grep -q "CUDAAGENT_NO_SUCH_VARIABLE" "$scratch/err" || fail "missing key variable: exit $code"

# A proposal naming an unknown operator: an error record with the reason, the rest are tasks.
start_server unknown-op
run --endpoint "$url" --count 3 --per-request 4
[[ $code == 0 ]] || fail "unknown-op: exit $code: $(cat "$scratch/err")"
[[ $(tasks) == 3 && $(errors) == 1 ]] || fail "unknown-op: $(tasks) tasks, $(errors) errors"
grep '"error"' "$scratch/out" | grep -q '"reason":"unknown operator '"'"'conv4d'"'"'"' || fail "unknown-op: no reason: $(grep error "$scratch/out")"
grep '"error"' "$scratch/out" | grep -q '"raw_prefix":"\[\\"conv4d\\",\\"relu\\"\]"' || fail "unknown-op: the proposal is not in the error record"
# --errors sends the rejection elsewhere; an operator outside --ops is rejected too.
run --endpoint "$url" --count 3 --per-request 4 --ops conv2d,batch_norm2d,relu,linear,leaky_relu --errors "$scratch/rejected"
[[ $(errors) == 0 ]] || fail "--errors: error records still on stdout"
grep -q "unknown operator 'conv4d'" "$scratch/rejected" || fail "--errors: the rejection is missing"
grep -q "'layer_norm' is not among the allowed operators" "$scratch/rejected" || fail "--ops not applied to proposals"

# HTTP 500 on the first request, then success: retried, with a warning.
start_server flaky
run --endpoint "$url" --count 3 --per-request 3
[[ $code == 0 && $(tasks) == 3 ]] || fail "flaky: exit $code, $(tasks) tasks: $(cat "$scratch/err")"
[[ $(requests) == 2 ]] || fail "flaky: $(requests) requests, expected 2 (one retry)"
grep -q "HTTP 500" "$scratch/err" && grep -q "retrying in" "$scratch/err" || fail "flaky: no retry warning: $(cat "$scratch/err")"
# Without retries the same server fails the first request and succeeds on the next one.
start_server flaky
run --endpoint "$url" --count 3 --per-request 3 --retries 0
[[ $code == 0 && $(tasks) == 3 && $(requests) == 2 ]] || fail "flaky without retries: exit $code, $(tasks) tasks"

# A body that is not JSON: a clear error each time, exit 1 after three failed requests.
start_server garbage
run --endpoint "$url" --count 3
[[ $code == 1 ]] || fail "garbage: exit $code, expected 1"
grep -q "response is not JSON" "$scratch/err" && grep -q "upstream exploded" "$scratch/err" || fail "garbage: unclear error: $(cat "$scratch/err")"
grep -q "giving up after 3 failed requests in a row" "$scratch/err" || fail "garbage: no final message"
[[ $(requests) == 3 ]] || fail "garbage: $(requests) requests (a 200 with garbage is not retried)"
[[ $(tasks) == 0 ]] || fail "garbage: tasks from garbage"

# HTTP 404 is not retried, and the server's message is shown.
start_server not-found
run --endpoint "$url" --count 1
[[ $code == 1 && $(requests) == 3 ]] || fail "not-found: exit $code after $(requests) requests"
grep -q "HTTP 404" "$scratch/err" && grep -q "model not found" "$scratch/err" || fail "not-found: unclear error"

# Prose without JSON: an error record per reply, the run ends at --max-requests with a warning.
start_server prose
run --endpoint "$url" --count 2 --max-requests 2
[[ $code == 0 && $(errors) == 2 && $(tasks) == 0 ]] || fail "prose: exit $code, $(errors) errors"
grep -q "the reply holds no JSON" "$scratch/out" || fail "prose: no reason"
grep -q "made 0 of 2 tasks in 2 requests" "$scratch/err" || fail "prose: no warning"

# Too slow for --timeout: timed out, retried once, then the next request; exit 1 in the end.
start_server slow
start=$(date +%s)
run --endpoint "$url" --count 1 --timeout 0.3 --retries 1 --max-requests 3
[[ $code == 1 ]] || fail "slow: exit $code"
grep -qi "timed out\|timeout" "$scratch/err" || fail "slow: no timeout in the message: $(cat "$scratch/err")"
(( $(date +%s) - start < 30 )) || fail "slow: the timeout did not cut the requests short"
stop_server

# Nothing listening: a connection error, retried, then exit 1.
run --endpoint "$url" --count 1 --retries 1
[[ $code == 1 ]] || fail "closed port: exit $code"
grep -q "after 2 tries" "$scratch/err" || fail "closed port: $(cat "$scratch/err")"

# Usage: --endpoint needs --model; --shard does not apply.
code=0; "$synth" --endpoint "$url" --count 1 >/dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "--endpoint without --model exited $code"
code=0; "$synth" --endpoint "$url" --model m --shard 0/2 >/dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "--shard in LLM mode exited $code"
echo "ok"
