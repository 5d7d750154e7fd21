#!/usr/bin/env bash
# The evaluation session on an H200, in one device call: the agent's loop (edit, build, verify,
# profile, reward) against CUDA Agent's released scripts in the same run, the GPU attack cases and
# honest controls, and an A-A timing check. Prints a Markdown table and leaves logs in OUT.
# Usage: tests/gpu/session_h200.sh BIN_DIR OUT [ANCHOR_WORKSPACE] [SECONDS]
#   BIN_DIR  the programs (built on Debian 12 with the CUDA Toolkit; source tests/gpu/device_env.sh
#            first where the machine lacks their libraries)
#   ANCHOR_WORKSPACE  CUDA Agent's released agent_workdir (its utils/ scripts are timed on the same
#            task family); skipped when not given.
# Knobs: ITERATIONS (4 warm edits), AA_REPEATS (3), FORWARDS ("1": the A-A's --forwards-per-call
# values), LOOP_FORWARDS (1: the loop's --forwards-per-call), CALL_WAITS ("spin block": the A-A's
# --call-wait values), SECTIONS ("anchor loop cases aa"),
# ANCHOR_OURS (1: also run CUDA Agent's example through our verify and profile), COLD_ITERATIONS
# (1: new processes per stage), LOOP_TASKS ("example large gemm conv softmax"), CASES (a glob of
# tests/gpu/cases/), PROFILE_ARGS (more cudaagent-profile arguments for the loop and the A-A, split
# at spaces: "--rounds 4 --max-rounds 20 --target-ci 0.02" for adaptive rounds), AA_TASKS
# ("relu_16m sgemm_2048 sgemm_4096"), CPU_GROUPS ("off": the A-A's placements, "off on" runs each
# repeat without and with profile's --cpu-groups), CALL_TIMERS ("auto", the tools' default: the A-A's
# --call-timer values, "host gpu" runs each repeat with both clocks; gpu-leadN adds --call-lead-us N), VERIFY_ARGS (more cudaagent-verify
# arguments for the cases; PROFILE_ARGS reach the cases' profile too), VERIFY_NICE (0: the niceness
# of the loop's one-pipeline verify, whose builds of the next edits overlap profile's rounds).
set -uo pipefail
bin=$1 out=$2 anchor=${3:-} budget=${4:-540}
root=$(cd "$(dirname "$0")/../.." && pwd)
deadline=$((SECONDS + budget))
left() { echo $((deadline - SECONDS)); }
read -ra profile_args <<<"${PROFILE_ARGS:-}"
read -ra verify_args <<<"${VERIFY_ARGS:-}"
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

# 2. The agent's loop, per kind of task (LOOP_TASKS): our example (128 KB of input), the same
#    task at 256 MB, a GEMM (cuBLAS + own epilogue), a convolution (cuDNN + own epilogue) and a
#    softmax (several operators fused). Cold: new processes per stage, as a pipeline runs them (the
#    first pays the precompiled torch header). Warm: one pipeline fed a stream of edited workspaces
#    (the task's sessions stay open; baselines from the store after the first). Anchor: CUDA Agent's
#    scripts (ANCHOR_WORKSPACE's utils/ and glue) on the same workspace, in the same run.
loop_workspace() {  # KIND DIR: writes DIR (model.py, model_new.py, kernels/) and echoes its .cu
  local kind=$1 dir=$2 task control
  case $kind in
    example) cp -r "$base" "$dir" ;;
    large)
      cp -r "$base" "$dir"
      sed -i 's/^batch_size = .*/batch_size = 65536/; s/^features = .*/features = 1024/' "$dir/model.py" ;;
    gemm) task=$root/tests/gpu/tasks/linear-relu control=$task/cublas ;;
    conv) task=$root/tests/gpu/tasks/conv2d-bias control=$task/cudnn ;;
    softmax) task=$root/tests/gpu/tasks/softmax-8192 control=$task/control-one-pass ;;
    *) return 1 ;;
  esac
  if [[ -n ${control:-} ]]; then
    mkdir -p "$dir"
    cp "$task/model.py" "$dir/"
    cp -r "$control/kernels" "$control/model_new.py" "$dir/"
  fi
  find "$dir/kernels" -name '*.cu' | sort | head -1
}
if [[ $sections == *loop* ]]; then
  for kind in ${LOOP_TASKS:-example large gemm conv softmax}; do
    (($(left) > 90)) || { row loop "$kind (stopped)" - - - "device time"; break; }
    ws=$scratch/loop-$kind
    cu=$(loop_workspace "$kind" "$ws") || { row loop "$kind" - "unknown kind" - ""; continue; }
    cp "$ws/model.py" "$scratch/model-$kind.py"
    db=$scratch/loop-$kind.db
    trusted=()  # several forwards per call time trusted code only; the reward refuses them otherwise
    ((${LOOP_FORWARDS:-1} > 1)) && trusted=(--trusted-code)
    for i in $(seq 1 "${COLD_ITERATIONS:-1}"); do
      [[ $i -gt 1 ]] && echo "// edit $i" >>"$cu"
      t=$(now)
      "$bin/cudaagent-verify" --quiet --device cuda --task "$scratch/model-$kind.py" "$ws" 2>>"$log" |
        "$bin/cudaagent-profile" --quiet --device cuda --db "$db" --forwards-per-call "${LOOP_FORWARDS:-1}" "${profile_args[@]}" 2>>"$log" |
        "$bin/cudaagent-reward" --quiet "${trusted[@]}" >"$out/cold-$kind-$i.json" 2>>"$log"
      row loop "$kind: new processes, iteration $i" PASS \
        "$(jq -r '.verify.verdict + "/" + (.profile.verdict // "-") + " reward " + (.reward.value | tostring)' "$out/cold-$kind-$i.json")" \
        "$(elapsed "$t")" "$(jq -c '{v: .verify.timings_s.total, p: .profile.timings_s.total, speedup: .profile.speedup.eager.median}' "$out/cold-$kind-$i.json")"
    done
    n=${ITERATIONS:-4}
    for i in $(seq 1 "$n"); do
      cp -r "$ws" "$scratch/warm-$kind-$i"
      echo "// warm edit $i $(date +%s%N)" >>"$scratch/warm-$kind-$i/${cu#"$ws"/}"
    done
    edits=()
    for i in $(seq 1 "$n"); do edits+=("$scratch/warm-$kind-$i"); done
    t=$(now)
    # VERIFY_NICE lowers the CPU priority of verify and its compilers, which build the next edit
    # while profile times this one: whether the builds are what spreads the timed calls.
    nice -n "${VERIFY_NICE:-0}" "$bin/cudaagent-verify" --quiet --device cuda --task "$scratch/model-$kind.py" \
      "${edits[@]}" 2>>"$log" |
      "$bin/cudaagent-profile" --quiet --device cuda --db "$db" --forwards-per-call "${LOOP_FORWARDS:-1}" "${profile_args[@]}" 2>>"$log" |
      "$bin/cudaagent-reward" --quiet "${trusted[@]}" >"$out/warm-$kind.jsonl" 2>>"$log"
    total=$(elapsed "$t")
    i=0
    while read -r line; do
      i=$((i + 1))
      row loop "$kind: one pipeline, edit $i" PASS \
        "$(jq -r '.verify.verdict + "/" + (.profile.verdict // "-") + " reward " + (.reward.value | tostring)' <<<"$line")" \
        "$(jq -r '(.verify.timings_s.total + .profile.timings_s.total) * 100 | round / 100' <<<"$line")" \
        "$(jq -c '{build: .verify.timings_s.build, checks: .verify.timings_s.checks, start: .verify.timings_s.candidate_start, profile: .profile.timings_s.total, rounds: .profile.timings_s.rounds, speedup: .profile.speedup.eager.median, cv: .profile.times_ms.candidate.cv, cost: .profile.call_cost.removed_ms, cand_cost: .profile.call_cost.candidate_arm.low_ms, rounds: .profile.rounds.run}' <<<"$line")"
    done <"$out/warm-$kind.jsonl"
    row loop "$kind: one pipeline, $n edits, wall" - - "$total" "verify, profile and reward overlap in the pipeline"
    # Evaluations per GPU-hour when builds run on the CPUs beside them: what each later edit held
    # the device for (verify's runner and checks, profile's runners and rounds), from the records.
    jq -s '.[1:] | map(.verify.timings_s.candidate_start + .verify.timings_s.checks + .verify.timings_s.candidate_end
                      + .profile.timings_s.runners_start + .profile.timings_s.rounds) | select(length > 0)
           | (add / length) as $s | "\($s * 100 | round / 100) \(3600 / $s | floor)"' -r \
      "$out/warm-$kind.jsonl" | while read -r seconds per_hour; do
      row loop "$kind: device time per evaluation (edits after the first)" - - "$seconds" "$per_hour evaluations per GPU-hour"
    done
    if [[ -n $anchor && -d $anchor/utils ]] && (($(left) > 90)); then
      # The anchor's kernel bindings include "../binding_registry.h", ours "binding_registry.h".
      cp -r "$anchor/utils" "$anchor/binding.cpp" "$anchor/binding_registry.h" "$ws/"
      cp "$anchor/binding_registry.h" "$ws/kernels/"
      (
        cd "$ws" || exit 1
        touch "$cu"
        t=$(now); timeout 300 bash utils/compile.sh >>"$log" 2>&1; rc=$?; row anchor "$kind: compile.sh (one .cu touched)" 0 $rc "$(elapsed "$t")" ""
        t=$(now); timeout 300 python3 -m utils.verification >>"$log" 2>&1; rc=$?; row anchor "$kind: verification.py" 0 $rc "$(elapsed "$t")" ""
        t=$(now); timeout 300 python3 -m utils.profiling >>"$log" 2>&1; rc=$?; row anchor "$kind: profiling.py" 0 $rc "$(elapsed "$t")" ""
      )
    fi
  done
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
    record=$("$bin/cudaagent-verify" --quiet --device cuda --task "$base/model.py" --timeout 20 "${verify_args[@]}" "$ws" 2>>"$log" |
      "$bin/cudaagent-profile" --quiet --device cuda --rounds 4 --timeout 20 "${profile_args[@]}" 2>>"$log")
    echo "$record" >>"$out/cases.jsonl"
    got=$(jq -r 'if .verify.verdict == "PASS" then (.profile.verdict // "PASS") else .verify.verdict end' <<<"$record")
    row cases "$name" "$expected" "$got" "$(elapsed "$t")" "$(jq -r '.profile.reason // .verify.reason' <<<"$record")"
  done
fi

# 4. A-A: the task's own Model as the candidate (its forward runs torch, so the audit rejects it,
#    but the times stand), a few repeats per time class: "no_significant_difference" expected. It
#    imports `model`, outside model_new.py's static policy: --no-python-policy. Each repeat runs
#    once per call wait in CALL_WAITS ("spin block": profile's --call-wait) and per forwards per
#    call in FORWARDS ("1": --forwards-per-call) and per FORWARD_SYNCS ("auto", the tools' default: --forward-sync)
#    and per CPU_GROUPS ("off"; "on": --cpu-groups), back to back, so the variants meet the same machine; --call-diagnostics says where each
#    call's time went.
if [[ $sections == *aa* ]]; then
  for task in ${AA_TASKS:-relu_16m sgemm_2048 sgemm_4096}; do
    for r in $(seq 1 "${AA_REPEATS:-3}"); do
      for wait in ${CALL_WAITS:-spin block}; do
        for forwards in ${FORWARDS:-1}; do
          for sync in ${FORWARD_SYNCS:-auto}; do
            for groups in ${CPU_GROUPS:-off}; do
              for timer in ${CALL_TIMERS:-auto}; do
                (($(left) > 30)) || break 7
                variant=$wait
                [[ $timer == auto ]] || variant+=-timer-$timer
                ((forwards == 1)) || variant+=-x$forwards
                [[ $sync == auto ]] || variant+=-sync-$sync
                timer_args=(--call-timer "${timer%%-lead*}")
                [[ $timer == *-lead* ]] && timer_args+=(--call-lead-us "${timer##*-lead}")
                group_args=()
                [[ $groups == on ]] && { variant+=-groups; group_args=(--cpu-groups); }
                ws=$scratch/aa-$task-$r-$variant
                mkdir -p "$ws/kernels"
                cp "$root/bench/tasks/aa/$task.py" "$ws/model.py"
                printf 'from model import Model\n\n\nclass ModelNew(Model):\n    pass\n' >"$ws/model_new.py"
                t=$(now)
                "$bin/cudaagent-profile" --quiet --device cuda --task "$ws/model.py" --compile-mode none \
                  --no-python-policy --call-wait "$wait" --forwards-per-call "$forwards" --forward-sync "$sync" \
                  "${timer_args[@]}" --call-diagnostics "${group_args[@]}" "${profile_args[@]}" "$ws" \
                  >"$out/aa-$task-$r-$variant.json" 2>>"$log"
                row aa "$task #$r $variant" no_significant_difference \
                  "$(jq -r '.profile.comparison.eager // .profile.verdict' "$out/aa-$task-$r-$variant.json")" "$(elapsed "$t")" \
                  "$(jq -c '{s: .profile.speedup.eager.median, ci: .profile.speedup.eager.ci95, cv_e: .profile.times_ms.eager.cv, cv_c: .profile.times_ms.candidate.cv, e_ms: .profile.times_ms.eager.median, cost: .profile.call_cost.removed_ms, cand_cost: .profile.call_cost.candidate_arm.low_ms, rounds: .profile.rounds.run, at: .profile.placement}' "$out/aa-$task-$r-$variant.json")"
              done
            done
          done
        done
      done
    done
  done
fi
cat "$table"
