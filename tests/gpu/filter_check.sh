#!/usr/bin/env bash
# cudaagent-filter's device path in a few minutes: good synthesised tasks must be kept (on CUDA:
# compiled, timed inside the window, 20 timed runs), and each broken task rejected with its reason:
# a syntax error (load), no get_inputs (interface), an infinite loop (timeout), a 1 TiB allocation on
# the device (memory), fresh noise in forward (determinism), a constant output (constant); a task
# whose first call alone is slow must still be kept with every timed run. Prints a table; exits 1
# on any mismatch, 2 on a usage error.
# Usage: tests/gpu/filter_check.sh BIN_DIR OUT [--device cuda|cpu]   (default cuda)
#   env: TIMEOUT (filter's per-job limit; default 90 on cuda, 20 on cpu), JOBS (default 4 / 2)
# On a CPU-only machine `--device cpu` runs the same cases on tiny tasks (a smoke test: torch 1.13
# there has no torch.compile, and the window is 0.001-100 ms).
set -uo pipefail
(($# == 2 || $# == 4)) || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1 out=$2 device=cuda
if (($# == 4)); then
  [[ $3 == --device && ($4 == cuda || $4 == cpu) ]] || { echo "filter_check: --device cuda|cpu" >&2; exit 2; }
  device=$4
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out" || exit 2
export CUDAAGENT_CACHE_DIR=${CUDAAGENT_CACHE_DIR:-/tmp/cudaagent-gpu-cache}
runs=20

# Good tasks: two fixed chains, sizes drawn. On CUDA their estimate is kept well inside the filter's
# 1-100 ms window, so an honest filter keeps them; on the CPU they are tiny.
if [[ $device == cuda ]]; then
  synth_size=(--window-ms 5,30) filter_device=(--device cuda --jobs "${JOBS:-4}" --timeout "${TIMEOUT:-90}")
else
  synth_size=(--batch 2 --max-dim 16)
  filter_device=(--device cpu --window-ms 0.001,100 --memory-limit 4G --jobs "${JOBS:-2}"
                 --timeout "${TIMEOUT:-20}")
fi
: >"$out/in.jsonl"
for chain in conv2d,relu linear,gelu; do
  "$bin/cudaagent-synth" -q --seed 7 --count 2 --chain "$chain" "${synth_size[@]}" >"$out/synth.jsonl" ||
    { echo "filter_check: synth failed" >&2; exit 1; }
  jq -c --arg c "$chain" 'select(.task) | .id = "good-\($c)-\(.task.meta.index)"' "$out/synth.jsonl" >>"$out/in.jsonl"
done
task_record() {  # NAME FILE
  jq -cRs --arg id "$1" '{id: $id, task: {source: "tests/gpu/filter_check", model_py: ., ops: [], meta: {}}}' <"$2"
}
for name in syntax_error missing_get_inputs infinite_loop nondeterministic constant; do
  task_record "$name" "$root/tests/filter/tasks/$name.py" >>"$out/in.jsonl"
done
for name in huge_device_tensor first_call_slow; do
  task_record "$name" "$root/tests/gpu/filter_tasks/$name.py" >>"$out/in.jsonl"
done

start=$SECONDS
"$bin/cudaagent-filter" "${filter_device[@]}" --runs "$runs" "$out/in.jsonl" >"$out/out.jsonl" 2>"$out/err"
rc=$?
echo "cudaagent-filter: exit $rc after $((SECONDS - start)) s (${filter_device[*]}); stderr in $out/err"

# Expected: first reason (or "kept"). Extra conditions for kept tasks are checked below.
declare -A expect=([syntax_error]=load [missing_get_inputs]=interface [infinite_loop]=timeout
                   [huge_device_tensor]=memory [nondeterministic]=determinism [constant]=constant
                   [first_call_slow]=kept)
failures=0
printf '| %-22s | %-12s | %-7s | %-34s | %-9s | %s |\n' task expected kept reasons eager_ms result
printf '|%s|\n' "------------------------|--------------|---------|------------------------------------|-----------|-------"
while IFS= read -r id; do
  expected=${expect[$id]:-kept}
  record=$(jq -c --arg id "$id" 'select(.id == $id)' "$out/out.jsonl" | head -1)
  if [[ -z $record ]]; then
    kept=missing reasons="(no record)" median=- ok=FAIL
  else
    kept=$(jq -r 'if .filter then .filter.kept else "error" end' <<<"$record")
    reasons=$(jq -r '[.filter.reasons[]?.check] | join(",")' <<<"$record")
    median=$(jq -r '.filter.eager_ms.median // "-" | if type == "number" then (. * 1000 | round) / 1000 else . end' <<<"$record")
    ok=FAIL
    if [[ $expected == kept ]]; then
      # Kept, timed with every run asked for, inside the window; on CUDA also compiled, on the GPU.
      condition='.filter.kept == true and .filter.eager_ms.runs == $runs and
                 .filter.eager_ms.median >= .filter.window_ms[0] and .filter.eager_ms.median <= .filter.window_ms[1]'
      [[ $device == cuda ]] && condition+=' and .filter.compile == "ok" and .filter.compile_ms.runs >= 3 and .filter.seconds.compile > 0 and .filter.device == "cuda" and (.filter.gpu | length > 0)'
      jq -e --argjson runs "$runs" "$condition" <<<"$record" >/dev/null && ok=pass
    else
      [[ $kept == false && ${reasons%%,*} == "$expected" ]] && ok=pass
    fi
  fi
  [[ $ok == pass ]] || failures=$((failures + 1))
  printf '| %-22s | %-12s | %-7s | %-34s | %-9s | %s |\n' "${id:0:22}" "$expected" "$kept" "${reasons:0:34}" "$median" "$ok"
  [[ $ok == pass ]] || echo "    $(jq -c '.filter // .error' <<<"${record:-null}" | cut -c1-600)"
done < <(jq -r .id "$out/in.jsonl")
if ((rc != 0)); then
  echo "filter exit $rc: $(tail -3 "$out/err")"
  failures=$((failures + 1))
fi
echo "$failures mismatches"
((failures == 0))
