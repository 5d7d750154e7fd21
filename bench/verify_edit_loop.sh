#!/usr/bin/env bash
# The agent's inner loop through one long-lived cudaagent-verify: edit one kernel file, send the
# candidate record, wait for its verdict; repeat. The first iteration pays the cold start (worker
# start, and the build of everything not yet in the cache); the others are what an agent sees.
# Usage: bench/verify_edit_loop.sh BIN_DIR WORKSPACE KERNEL_FILE DEVICE ITERATIONS OUT_JSONL
# VERIFY_ARGS: extra flags (default none: one verifier process reuses its task's session across
# the iterations anyway). KERNEL_FILE is relative to WORKSPACE; each edit appends a comment, so the file's hash changes
# and exactly that file is recompiled. Prints one line per iteration: seconds, verdict, phases.
set -euo pipefail
bin=$1 workspace=$2 kernel=$3 device=$4 iterations=$5 out=$6
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$workspace" "$scratch/ws"
cp "$scratch/ws/model.py" "$scratch/model.py"  # pristine, byte for byte
mkfifo "$scratch/in"
# Through a pipe: on a regular file the stage buffers its output, on a pipe it flushes each record.
read -ra extra <<<"${VERIFY_ARGS-}"
"$bin/cudaagent-verify" --quiet --device "$device" "${extra[@]}" "$scratch/in" 2>"$scratch/err" | cat >"$scratch/out" &
verifier=$!
exec 3>"$scratch/in"
: >"$out"
for i in $(seq 1 "$iterations"); do
  [[ $i -gt 1 ]] && echo "// edit $i $(date +%s%N)" >>"$scratch/ws/$kernel"
  start=$(date +%s.%N)
  jq -nc --rawfile m "$scratch/model.py" --arg w "$scratch/ws" --arg id "iteration-$i" \
    '{id: $id, task: {model_py: $m}, candidate: {workspace: $w}}' >&3
  while [[ $(wc -l <"$scratch/out") -lt $i ]]; do
    kill -0 "$verifier" 2>/dev/null || { cat "$scratch/err" >&2; exit 1; }
    sleep 0.01
  done
  end=$(date +%s.%N)
  record=$(sed -n "${i}p" "$scratch/out")
  echo "$record" >>"$out"
  printf '%s\t%s\t%s\n' "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')" \
    "$(jq -r '.verify.verdict // .error.reason' <<<"$record")" "$(jq -c '.verify.timings_s' <<<"$record")"
done
exec 3>&-
wait "$verifier"
