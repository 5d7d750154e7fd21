# Shared by the rollout behaviour scripts: the scripted server, the replay scripts, a runner, and
# readers of the trajectory records. Source after tests/cli/lib.sh; `bin` must be set.
here_rollout=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here_rollout/../../.." && pwd)
example=$root/share/examples/workspaces/bias-relu-cpu
task=$example/model.py
rollout=$bin/cudaagent-rollout
# The verify tests' cache in the same build tree: torch's precompiled header is made once.
export CUDAAGENT_CACHE_DIR=${CUDAAGENT_CACHE_DIR:-$(cd "$bin/.." && pwd)/test-cache}
python3 "$here_rollout/make_scripts.py" "$example" "$scratch"
server_pid=
stop_server() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  server_pid=
}
trap 'stop_server; rm -rf "$scratch"' EXIT

# start_server SCRIPT [FLAGS...]: sets $url and $log.
start_server() {
  stop_server
  rm -f "$scratch/port"
  log=$scratch/requests.log
  : >"$log"
  python3 "$root/share/scripted-model/scripted_server.py" "$scratch/$1" "$scratch/port" "$log" "${@:2}" &
  server_pid=$!
  for _ in $(seq 200); do [[ -s $scratch/port ]] && break; sleep 0.05; done
  [[ -s $scratch/port ]] || fail "the scripted server did not start"
  url=http://127.0.0.1:$(cat "$scratch/port")
}

# run ARGS...: stdout in $scratch/out, stderr in $scratch/err, exit code in $code.
run() {
  code=0
  "$rollout" --device cpu --work-dir "$scratch" "$@" >"$scratch/out" 2>"$scratch/err" || code=$?
}

# q FILTER: jq on the first record of $scratch/out.
q() { head -1 "$scratch/out" | jq -r "$1"; }
