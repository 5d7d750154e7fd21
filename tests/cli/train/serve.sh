#!/usr/bin/env bash
# cudaagent-train serve over real HTTP on localhost: greedy completions of concurrent requests
# (decoded together) equal Hugging Face generate, chat rendering and /tokenize match HF's ids,
# vLLM-style fields are present, a reload over HTTP and one by SIGHUP switch weights, bad requests
# get 4xx, and SIGTERM ends the server with 128+15 (serve_client.py holds the checks).
source "$(dirname "$0")/../lib.sh"
bin=$1
fixtures=tests/fixtures/train
"$bin/cudaagent-train" serve "$fixtures/qwen2-tiny" --port 0 --max-num-seqs 4 --max-model-len 1024 \
  >"$scratch/serve.out" 2>"$scratch/serve.err" &
server=$!
stop_server() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
trap 'stop_server; rm -rf "$scratch"' EXIT
for _ in $(seq 600); do
  [[ -s $scratch/serve.out ]] && break
  kill -0 "$server" 2>/dev/null || { cat "$scratch/serve.err" >&2; fail "serve exited before listening"; }
  sleep 0.1
done
[[ -s $scratch/serve.out ]] || fail "serve did not report its address within 60 s"
url=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["serve"]["url"])' <"$scratch/serve.out")
python3 "$(dirname "$0")/serve_client.py" "$url" "$fixtures" "$server" || {
  cat "$scratch/serve.err" >&2
  fail "serve checks failed"
}
kill -TERM "$server"
code=0
wait "$server" || code=$?
[[ $code == 143 ]] || fail "serve exited $code after SIGTERM, expected 143"
grep -q "SIGHUP: reloading" "$scratch/serve.err" || fail "no reload was logged for SIGHUP"
echo ok
