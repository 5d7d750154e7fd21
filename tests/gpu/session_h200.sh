#!/usr/bin/env bash
# The evaluation session on an H200, in one device call: the agent's loop (edit, build, verify,
# profile, reward) against CUDA Agent's released scripts in the same run, the GPU attack cases and
# honest controls, and an A-A timing check. Prints a Markdown table and leaves logs in OUT.
# Usage: tests/gpu/session_h200.sh BIN_DIR OUT [ANCHOR_WORKSPACE] [SECONDS]
#   BIN_DIR  the programs (built on Debian 12 with the CUDA Toolkit; source tests/gpu/device_env.sh
#            first where the machine lacks their libraries)
#   ANCHOR_WORKSPACE  CUDA Agent's released agent_workdir (its utils/ scripts are timed on the same
#            task family); skipped when not given.
# Knobs: ITERATIONS (4 warm edits), AA_REPEATS (3), SECTIONS ("anchor loop cases aa"),
# ANCHOR_OURS (1: also run CUDA Agent's example through our verify and profile), COLD_ITERATIONS
# (2: new processes per stage), CASES (a glob of tests/gpu/cases/).
set -uo pipefail
bin=$1 out=$2 anchor=${3:-} budget=${4:-540}
root=$(cd "$(dirname "$0")/../.." && pwd)
deadline=$((SECONDS + budget))
left() { echo $((deadline - SECONDS)); }
mkdir -p "$out"
export CUDAAGENT_CACHE_DIR=${CUDAAGENT_CACHE_DIR:-/tmp/cudaagent-gpu-cache}
table=$out/results.md
log=$out/log.txt
: >"$log"
echo "| section | item | expected | got | seconds | detail |" >"$table"
echo "|---|---|---|---|---|---|" >>"$table"
row() { echo "| $1 | $2 | $3 | $4 | $5 | $(tr '|' '/' <<<"$6" | cut -c1-160) |" >>"$table"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
sections=${SECTIONS:-"anchor loop cases aa"}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >>"$log" 2>&1
"$bin/cudaagent-verify" --version >>"$log" 2>&1
base=$root/share/examples/workspaces/bias-relu-cuda
scratch=$(mktemp -d)

# 1. CUDA Agent's scripts on their own example: cold compile, compile after touching one .cu,
#    verification, profiling (the anchor of the issue's table, measured in this run).
if [[ $sections == *anchor* && -n $anchor && -d $anchor ]]; then
  cp -r "$anchor" "$scratch/anchor"
  (
    cd "$scratch/anchor" || exit 1
    t=$(now); bash utils/compile.sh >>"$log" 2>&1; rc=$?; row anchor "compile.sh (cold)" 0 $rc "$(elapsed "$t")" ""
    touch kernels/*.cu
    t=$(now); bash utils/compile.sh >>"$log" 2>&1; rc=$?; row anchor "compile.sh (one .cu touched)" 0 $rc "$(elapsed "$t")" ""
    t=$(now); timeout 300 python3 -m utils.verification >>"$log" 2>&1; rc=$?; row anchor "verification.py" 0 $rc "$(elapsed "$t")" ""
    t=$(now); timeout 300 python3 -m utils.profiling >>"$log" 2>&1; rc=$?; row anchor "profiling.py" 0 $rc "$(elapsed "$t")" ""
  )
  # CUDA Agent's example, unchanged, through our verify and profile (ANCHOR_OURS=0 skips it).
  if [[ ${ANCHOR_OURS:-1} == 1 ]]; then
    t=$(now)
    "$bin/cudaagent-verify" --quiet --device cuda --task "$scratch/anchor/model.py" "$scratch/anchor" 2>>"$log" |
      "$bin/cudaagent-profile" --quiet --device cuda >"$out/anchor-ours.jsonl" 2>>"$log"
    row anchor "their example through our verify and profile" PASS \
      "$(jq -r '.verify.verdict + "/" + (.profile.verdict // "-")' "$out/anchor-ours.jsonl")" "$(elapsed "$t")" \
      "$(jq -r '.profile.reason // .verify.reason' "$out/anchor-ours.jsonl")"
  fi
fi

# 2. The agent's loop on our example. Cold: new processes per stage, as a pipeline runs them
#    (the first pays the precompiled torch header). Warm: one pipeline fed a stream of edited
#    workspaces (the task's sessions stay open; baselines from the store after the first).
if [[ $sections == *loop* ]]; then
  cp -r "$base" "$scratch/ws"
  cp "$base/model.py" "$scratch/model.py"
  for i in $(seq 1 "${COLD_ITERATIONS:-2}"); do
    [[ $i -gt 1 ]] && echo "// edit $i" >>"$scratch/ws/kernels/bias_relu.cu"
    t=$(now)
    "$bin/cudaagent-verify" --quiet --device cuda --task "$scratch/model.py" "$scratch/ws" 2>>"$log" |
      "$bin/cudaagent-profile" --quiet --device cuda --db "$scratch/cold.db" 2>>"$log" |
      "$bin/cudaagent-reward" --quiet >"$out/cold-$i.json" 2>>"$log"
    row loop "new processes, iteration $i$([[ $i == 1 ]] && echo ' (cold cache)')" PASS \
      "$(jq -r '.verify.verdict + "/" + (.profile.verdict // "-") + " reward " + (.reward.value | tostring)' "$out/cold-$i.json")" \
      "$(elapsed "$t")" "$(jq -c '{v: .verify.timings_s, p: .profile.timings_s}' "$out/cold-$i.json")"
  done
  n=${ITERATIONS:-4}
  for i in $(seq 1 "$n"); do
    cp -r "$scratch/ws" "$scratch/warm-$i"
    echo "// warm edit $i $(date +%s%N)" >>"$scratch/warm-$i/kernels/bias_relu.cu"
  done
  t=$(now)
  "$bin/cudaagent-verify" --quiet --device cuda --task "$scratch/model.py" $(for i in $(seq 1 "$n"); do echo "$scratch/warm-$i"; done) 2>>"$log" |
    "$bin/cudaagent-profile" --quiet --device cuda --db "$scratch/cold.db" 2>>"$log" |
    "$bin/cudaagent-reward" --quiet >"$out/warm.jsonl" 2>>"$log"
  total=$(elapsed "$t")
  i=0
  while read -r line; do
    i=$((i + 1))
    row loop "one pipeline, edit $i" PASS \
      "$(jq -r '.verify.verdict + "/" + (.profile.verdict // "-") + " reward " + (.reward.value | tostring)' <<<"$line")" \
      "$(jq -r '(.verify.timings_s.total + .profile.timings_s.total) * 100 | round / 100' <<<"$line")" \
      "$(jq -c '{build: .verify.timings_s.build, checks: .verify.timings_s.checks, start: .verify.timings_s.candidate_start, profile: .profile.timings_s, speedup: .profile.speedup.eager.median, cv: .profile.times_ms.candidate.cv}' <<<"$line")"
  done <"$out/warm.jsonl"
  row loop "one pipeline, $n edits, wall" - - "$total" "verify, profile and reward overlap in the pipeline"
fi

# 3. The GPU attack cases and honest controls (tests/gpu/cases), each through verify and, when it
#    passes verification, profile.
if [[ $sections == *cases* ]]; then
  for case_dir in "$root"/tests/gpu/cases/${CASES:-*}/; do
    (($(left) > 60)) || { row cases "(stopped)" - - - "device time"; break; }
    name=$(basename "$case_dir")
    expected=$(cat "$case_dir/expected")
    ws=$scratch/case-$name
    rm -rf "$ws"
    cp -r "$base" "$ws"
    (cd "$case_dir" && find . -type f ! -name expected ! -name remove ! -name setup.sh ! -name check.sh ! -name README) |
      while read -r file; do mkdir -p "$ws/$(dirname "$file")"; cp "$case_dir/$file" "$ws/$file"; done
    [[ -f $case_dir/remove ]] && while read -r file; do rm -f "$ws/$file"; done <"$case_dir/remove"
    t=$(now)
    record=$("$bin/cudaagent-verify" --quiet --device cuda --task "$base/model.py" --timeout 20 "$ws" 2>>"$log" |
      "$bin/cudaagent-profile" --quiet --device cuda --rounds 4 --timeout 20 2>>"$log")
    echo "$record" >>"$out/cases.jsonl"
    got=$(jq -r 'if .verify.verdict == "PASS" then (.profile.verdict // "PASS") else .verify.verdict end' <<<"$record")
    row cases "$name" "$expected" "$got" "$(elapsed "$t")" "$(jq -r '.profile.reason // .verify.reason' <<<"$record")"
  done
fi

# 4. A-A: the task's own Model as the candidate (its forward runs torch, so the audit rejects it,
#    but the times stand), a few repeats per time class: "no_significant_difference" expected. It
#    imports `model`, outside model_new.py's static policy: --no-python-policy.
if [[ $sections == *aa* ]]; then
  for task in relu_16m sgemm_2048 sgemm_4096; do
    for r in $(seq 1 "${AA_REPEATS:-3}"); do
      (($(left) > 30)) || break 2
      ws=$scratch/aa-$task-$r
      mkdir -p "$ws/kernels"
      cp "$root/bench/tasks/aa/$task.py" "$ws/model.py"
      printf 'from model import Model\n\n\nclass ModelNew(Model):\n    pass\n' >"$ws/model_new.py"
      cp "$root/bench/tasks/aa/$task.py" "$ws/model.py"
      t=$(now)
      "$bin/cudaagent-profile" --quiet --device cuda --task "$ws/model.py" --compile-mode none \
        --no-python-policy "$ws" \
        >"$out/aa-$task-$r.json" 2>>"$log"
      row aa "$task #$r" no_significant_difference \
        "$(jq -r '.profile.comparison.eager // .profile.verdict' "$out/aa-$task-$r.json")" "$(elapsed "$t")" \
        "$(jq -c '{s: .profile.speedup.eager.median, ci: .profile.speedup.eager.ci95, cv_e: .profile.times_ms.eager.cv, cv_c: .profile.times_ms.candidate.cv, e_ms: .profile.times_ms.eager.median, cost: .profile.call_cost.removed_ms}' "$out/aa-$task-$r.json")"
    done
  done
fi
cat "$table"
