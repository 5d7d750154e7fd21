#!/usr/bin/env bash
# Every kind of task the filter must tell apart, in one run with two workers: a good task is kept
# and timed; each broken one is rejected with exactly the expected reasons, never a crash of the
# filter; records come out in input order with their other keys untouched; nothing a task wrote
# reaches the host.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"
marker=cudaagent-filter-test-marker
rm -f "/tmp/$marker"
[[ ! -e /etc/$marker ]] || fail "/etc/$marker exists before the test"

names=(good nondeterministic input_independent constant all_zero syntax_error missing_get_inputs
       get_inputs_raises infinite_loop huge_tensor writes_file opens_socket slow exits_process)
# The good task carries synth's description of its tensors, from which its device memory is
# estimated: 2 * 4,096 input bytes + 2 * 4,096 output bytes + 10,000 / 2 of traffic (of which
# 4,096 + 4,096 resident while torch.compile works).
"$records" "${names[@]}" |
  jq -c 'if .id == "good" then .task.meta = {dtype: "float32", input_shapes: [[16, 64]],
                                             output_shape: [16, 64], bytes: 10000} else . end' \
    >"$scratch/in.jsonl"
# The window fits the good task on a loaded CPU and not the slow one (60 ms per call); the timeout
# ends the infinite loop; the memory limit is below the huge task's 8 GiB and far above torch's needs.
start=$SECONDS
"$filter" --device cpu --window-ms 0.0001,25 --jobs 2 --timeout 20 --memory-limit 4G \
  "$scratch/in.jsonl" >"$scratch/out.jsonl" 2>"$scratch/err" || fail "exit $?: $(cat "$scratch/err")"
echo "filtered ${#names[@]} tasks in $((SECONDS - start)) s"

expect() {  # NAME KEPT CHECKS [DETAIL-SUBSTRING]
  local kept checks
  kept=$(kept_of "$scratch/out.jsonl" "$1")
  checks=$(checks_of "$scratch/out.jsonl" "$1")
  [[ $kept == "$2" && $checks == "$3" ]] ||
    fail "$1: kept=$kept reasons=[$checks], expected kept=$2 reasons=[$3]: $(grep "\"id\":\"$1\"" "$scratch/out.jsonl" | jq -c .filter)"
  if [[ -n ${4:-} ]]; then
    jq -e -s --arg id "$1" --arg text "$4" '.[] | select(.id == $id) | any(.filter.reasons[]; .detail | contains($text))' \
      "$scratch/out.jsonl" >/dev/null || fail "$1: no reason mentions '$4'"
  fi
}
expect good true ""
expect nondeterministic false determinism "two runs on the same inputs differ"
expect input_independent false input_dependence
expect constant false constant,input_dependence "is constant (every element 3)"
expect all_zero false all_zero,input_dependence "is all zeros"
expect syntax_error false load "SyntaxError"
expect missing_get_inputs false interface "defines no get_inputs"
expect get_inputs_raises false inputs "is invalid for input of size 64"
expect infinite_loop false timeout "timed out after 20.0 s in forward"
expect huge_tensor false memory "can't allocate memory"
expect writes_file false init "Read-only file system: '/etc/$marker'"
expect opens_socket false eager "Operation not permitted"
expect slow false eager_time "is above the window"
expect exits_process false crash "exited with code 0 in forward"

# The good task was timed; the others were not.
jq -e -s '.[] | select(.id == "good") | .filter.eager_ms.runs == 10 and .filter.eager_ms.median > 0 and
       .filter.determinism == "bitwise" and (.filter.compile | startswith("skipped: torch 1."))' \
  "$scratch/out.jsonl" >/dev/null || fail "good: $(head -1 "$scratch/out.jsonl" | jq -c .filter)"
jq -e -s '.[] | select(.id == "slow") | .filter.eager_ms.median >= 60' "$scratch/out.jsonl" >/dev/null ||
  fail "slow: not timed at 60 ms or more"
[[ $(jq -c 'select(.filter.eager_ms != null) | .id' "$scratch/out.jsonl" | tr -d '\n') == '"good""slow"' ]] ||
  fail "tasks other than good and slow were timed"

# Where the good task's seconds went: the wait for a seat, and the job's phases as its process
# reported them (every phase it passed, its judging and the timing ones included).
jq -e -s '.[] | select(.id == "good") | .filter.seconds | .seat_wait >= 0 and
       (.phases | keys) == ["checked", "forward", "init", "inputs", "interface", "judge", "load", "start",
                            "timing", "torch", "warmup"] and all(.phases[]; . >= 0)' \
  "$scratch/out.jsonl" >/dev/null || fail "good: seconds $(head -1 "$scratch/out.jsonl" | jq -c .filter.seconds)"

# The estimate is recorded beside the job's peak (0 on the CPU); a task without meta has none.
jq -e -s '(.[] | select(.id == "good") | .filter.memory == {estimate_bytes: 21384, resident_bytes: 8192, peak_bytes: 0}) and
          (.[] | select(.id == "slow") | .filter.memory.estimate_bytes == 0)' "$scratch/out.jsonl" >/dev/null ||
  fail "memory: $(jq -c '{id, memory: .filter.memory}' "$scratch/out.jsonl" | head -3)"

# Warm workers: only the first task of each of the two threads paid for a worker start (a third
# start only if the infinite loop's killed worker was given another task).
starts=$(jq -s '[.[] | select(.filter.seconds.worker_start > 0)] | length' "$scratch/out.jsonl")
((starts >= 1 && starts <= 3)) || fail "$starts tasks started a harness worker, expected 1 to 3"

# Input order, other keys byte for byte.
jq -r .id "$scratch/out.jsonl" >"$scratch/ids"
printf '%s\n' "${names[@]}" | diff - "$scratch/ids" || fail "records are not in input order"
jq -c 'del(.filter)' "$scratch/out.jsonl" | diff <(jq -c . "$scratch/in.jsonl") - ||
  fail "the filter changed keys other than its own"

[[ ! -e /tmp/$marker ]] || fail "a task's /tmp write reached the host"
[[ ! -e /etc/$marker ]] || fail "a task's /etc write reached the host"
echo "ok"
