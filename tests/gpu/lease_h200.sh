#!/usr/bin/env bash
# The GPU checks of the open work, in phases that each fit one device call (10 minutes), so a
# session's 30 minutes of device time go to two or three calls (choose the phases it needs). Run
# from the repository root on the GPU machine, with the binaries built here on Debian 12 and
# carried (build/layout/bin, .deps: made by tests/gpu/make_deps.sh; .deps/train for `train` and
# `dist`, made by tests/gpu/train/fetch_debs.sh; .anchor for CUDA Agent's workspace in `timing`).
#
#   tests/gpu/lease_h200.sh checks BIN OUT   cudaagent-train built against the machine's torch (in
#       the background, niced, where .deps/train was carried), then rollout_check.sh, the GPU cases
#       and controls of run_h200.sh, stop_check.sh and the CPU catalog on the CUDA base while time
#       is left; CHECK_STEPS (default "rollout verify-sets stop catalog") runs some of them only,
#       TRAIN_BUILD=0 skips the build, CASE_SHARDS (3) verifier processes share each case set
#   tests/gpu/lease_h200.sh train BIN OUT    parity.sh (reusing build/gpu-train when the machine is
#       still warm), ppo_bench.sh, then rollout episodes against cudaagent-train serve
#   tests/gpu/lease_h200.sh dist BIN OUT     on the nvidia-h200-x2 kind (two GPUs), with .deps/train
#       carried: cudaagent-train built against the machine's torch (parity.sh's build into
#       build/gpu-train, skipped while a warm machine still has it), then tests/gpu/train/dist_x2.sh:
#       PPO on the fixtures' tiny Qwen2 by one rank and by two srun-style NCCL ranks must reach the
#       same weights, and PPO update tokens/s of the Qwen2-0.5B shape on one GPU and on two
#       (NCCL_NVLS_ENABLE=0 throughout); BIN is not used
#   tests/gpu/lease_h200.sh timing BIN OUT   session_h200.sh: the agent's loop per kind of task
#       (small, 256 MB, GEMM, convolution, softmax) beside CUDA Agent's scripts on each
#   tests/gpu/lease_h200.sh aa BIN OUT       context_switch_probe.py, then session_h200.sh's A-A checks (relu_16m, sgemm_2048,
#       sgemm_4096; AA_REPEATS, default 5, each with profile's --call-wait spin and block:
#       CALL_WAITS, each --forwards-per-call in FORWARDS, default 1, and each --forward-sync in
#       FORWARD_SYNCS, default auto (the tools'); forward_sync_probe.py, forward_overlap_check.sh and owner_off_sm_probe.py first): a candidate identical
#       to eager must show no difference
#   tests/gpu/lease_h200.sh trace BIN OUT    kernel_trace_check.sh (the candidate's kernel trace in
#       profile's session: attack cases and the honest example; BIN/../lib/libcudaagent_cupti.so),
#       then session_h200.sh's A-A with --kernel-trace off and on (AA_TASKS, AA_REPEATS: 2)
#   tests/gpu/lease_h200.sh timer BIN OUT    the GPU call timer: session_h200.sh's GPU cases through
#       verify and profile with --call-timer gpu (controls PASS, no attack does), its A-A with the
#       host and the GPU clock back to back (AA_TASKS, AA_REPEATS: 2; CALL_TIMERS, default "host gpu",
#       as session_h200.sh reads it), kernel_trace_check.sh with
#       --call-timer gpu; window_escape_check.sh (input-independent work before and after a
#       forward must be timed) with "escape" in TIMER_STEPS (default "cases aa trace");
#       TIMER_PROFILE_ARGS: more profile arguments for the cases (FORWARD_SYNCS reaches the A-A)
#   tests/gpu/lease_h200.sh data BIN OUT     filter_check.sh, then a timed sample of the dataset
#       (bench/run_data_bench.sh, resumable on the same OUT/logs/data) and the synth device model
#       calibrated from its measured eager times (bench/calibrate_synth.py)
#   tests/gpu/lease_h200.sh dataset BIN OUT  (fork_poison_probe.py with FORK_PROBE=1, the aa phase's
#       forward_overlap_check.sh and owner_off_sm_probe.py with TIMING_CHECKS=1), then one part of the training set's filter
#       (scripts/build_dataset.sh filter) for most of the call: the state folder carried in as
#       .data/ops6k (DATASET_STATE; made by `scripts/build_dataset.sh restore`, or prepare, on the
#       build machine, and saved there again after the call: `scripts/build_dataset.sh save`)
#       is copied to OUT/ops6k and the part runs there; what comes back as ops6k/ replaces
#       .data/ops6k before the next call. A call cut short by the device budget leaves 7 files
#       there (results.jsonl, filter.db with its -wal and -shm instead of the packed ones), so
#       this phase keeps its logs outside OUT until they are packed: of at most 8 files that come
#       back, loose logs would have pushed out the state
#
# Each phase stops its steps by LIMIT seconds (default 560), keeps every log under OUT/logs (dataset:
# a temporary folder), and packs them into OUT/logs.tgz (large model files left out): what comes
# back from a device call. A step's table is printed at the end.
set -uo pipefail
(($# == 3)) || { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2; exit 2; }
phase=$1 bin=$2 out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
logs=$out/logs
[[ $phase == dataset ]] && logs=$(mktemp -d)/logs
mkdir -p "$out" "$logs" && : >"$logs/steps.md"
limit=${LIMIT:-560}
started=$SECONDS
left() { echo $((limit - (SECONDS - started))); }
export CUDAAGENT_CACHE_DIR=${CUDAAGENT_CACHE_DIR:-/tmp/cudaagent-gpu-cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv >"$logs/gpu.txt" 2>&1

# step NAME SECONDS COMMAND...: runs COMMAND with its output in logs/NAME.txt, stopped after
# SECONDS (or what is left of the phase, if less); a line in logs/steps.md says how it ended.
step() {
  local name=$1 seconds=$2
  shift 2
  ((seconds > $(left))) && seconds=$(left)
  if ((seconds < 30)); then
    echo "| $name | not run | $(left) s left |" >>"$logs/steps.md"
    return
  fi
  local t0=$SECONDS
  timeout -k 5 "$seconds" "$@" >"$logs/$name.txt" 2>&1
  echo "| $name | exit $? | $((SECONDS - t0)) s | at $((SECONDS - started)) s |" >>"$logs/steps.md"
}

with_binaries() { source "$root/tests/gpu/device_env.sh" "$root/.deps" "$bin" >/dev/null 2>&1; export PATH=/tmp/deps/usr/bin:$PATH; }

finish() {
  echo "| step | result | seconds | when |"
  cat "$logs/steps.md"
  for table in "$@"; do [[ -f $logs/$table ]] && { echo; echo "## $table"; cat "$logs/$table"; }; done
  tar -C "$(dirname "$logs")" --exclude='*.safetensors' --exclude='*.bin' --exclude='*.pt' -czf "$out/logs.tgz" logs
}

# Whether a candidate can overlap a call's forwards on streams of its own, or compute a call's
# later slots in its first forward; then whether one-forward calls are steadier when the owner
# keeps off the SMs during a round.
timing_checks() {
  step forward-overlap 240 bash "$root/tests/gpu/forward_overlap_check.sh" "$bin" "$logs/forward-overlap"
  step owner-off-sm 120 python3 "$root/tests/gpu/owner_off_sm_probe.py" 40 3
  jq -r '.tasks | to_entries[] | .key as $t | .value | to_entries[] | "| \($t) | \(.key) | \(.value.median) | \(.value.p10)–\(.value.p90) | \(.value.cv) |"' \
    <(sed -n '/^{/,/^}/p' "$logs/owner-off-sm.txt") >"$logs/owner-off-sm.md" 2>/dev/null &&
    sed -i '1i | task | way | µs per call (median) | p10–p90 | CV |\n|---|---|---|---|---|' "$logs/owner-off-sm.md"
}

case $phase in
checks)
  # CHECK_STEPS picks the steps (in this order whatever it says): all four do not fit one call
  # since the GPU cases grew, so a session can run the verify sets and the catalog on their own.
  # The train build runs beside them only where its packages were carried (.deps/train).
  check_steps=" ${CHECK_STEPS:-rollout verify-sets stop catalog} "
  wants() { [[ $check_steps == *" $1 "* ]]; }
  builder=""
  if [[ ${TRAIN_BUILD:-1} == 1 ]] && compgen -G "$root/.deps/train/*.deb" >/dev/null; then
    (
      cd "$root" && PARITY_BUILD_DIR=build/gpu-train PARITY_BUILD_ONLY=1 nice -n 15 \
        bash tests/gpu/train/parity.sh "$logs/train-build"
      echo "train build: exit $?"
    ) >"$logs/train-build.txt" 2>&1 &
    builder=$!
  fi
  with_binaries
  wants rollout && step rollout 200 env CONCURRENT=${CONCURRENT:-4} bash "$root/tests/gpu/rollout_check.sh" "$bin" "$logs/rollout"
  wants verify-sets && step verify-sets "${VERIFY_SECONDS:-300}" env KEEP_CACHE=1 CASE_SHARDS="${CASE_SHARDS:-3}" \
    SETS="gpu-cases conv-controls softmax-tolerance gemm-controls" \
    EDIT_ITERATIONS=2 CASE_TIMEOUT=15 bash "$root/tests/gpu/run_h200.sh" "$bin" "$logs/verify"
  wants stop && step stop 120 env SETTLE=15 bash "$root/tests/gpu/stop_check.sh" "$bin" "$logs/stop"
  if [[ -n $builder ]]; then
    wait "$builder"
    tail -1 "$logs/train-build.txt" >>"$logs/steps.md"
  fi
  wants catalog && step catalog 600 env KEEP_CACHE=1 CASE_SHARDS="${CASE_SHARDS:-3}" SETS=catalog EDIT_ITERATIONS=1 bash "$root/tests/gpu/run_h200.sh" "$bin" "$logs/catalog"
  [[ -f $logs/rollout.txt ]] && tail -12 "$logs/rollout.txt" >"$logs/rollout.md"
  finish rollout.md verify/results.md stop/summary.md catalog/results.md
  ;;
train)
  step parity 330 env PARITY_BUILD_DIR="$root/build/gpu-train" bash "$root/tests/gpu/train/parity.sh" "$logs/parity"
  step ppo 600 env ROWS=${ROWS:-32} ITERATIONS=${ITERATIONS:-2} bash "$root/tests/gpu/train/ppo_bench.sh" \
    "$root/build/gpu-train/bin" "$logs/ppo"
  # Rollout against the policy server: cudaagent-train serve on the random Qwen2-0.5B-shaped model
  # ppo_bench made (its output is noise), with the fixtures' tokenizer; the loop must survive it.
  if [[ -f $logs/ppo/model/config.json ]] && (($(left) > 90)); then
    (
      torch_lib=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__) + "/lib")')
      export LD_LIBRARY_PATH=$root/build/gpu-train/extra-lib:$torch_lib
      exec "$root/build/gpu-train/bin/cudaagent-train" serve "$logs/ppo/model" --tokenizer "$root/tests/fixtures/train/tokenizer" \
        --device cuda --dtype bfloat16 --port 0 --served-model-name policy --max-model-len 8192 --quiet
    ) >"$logs/serve.url" 2>"$logs/serve.err" &
    server=$!
    for _ in $(seq 600); do [[ -s $logs/serve.url ]] && break; sleep 0.2; done
    url=$(jq -r .serve.url "$logs/serve.url" 2>/dev/null)
    with_binaries
    step rollout-serve 240 env ONLY_SERVE=1 SERVE_URL="$url" bash "$root/tests/gpu/rollout_check.sh" "$bin" "$logs/rollout-serve"
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    tail -4 "$logs/rollout-serve.txt" >"$logs/rollout-serve.md"
  fi
  finish parity/results.md ppo/summary.md rollout-serve.md
  ;;
dist)
  # Two GPUs (the nvidia-h200-x2 kind). The build took about 3 minutes on 16 cores (none while a
  # warm machine still has build/gpu-train); dist_x2.sh gets what is left, about 4 minutes used.
  step build 330 env PARITY_BUILD_DIR="$root/build/gpu-train" PARITY_BUILD_ONLY=1 \
    bash "$root/tests/gpu/train/parity.sh" "$logs/train-build"
  step dist "$(($(left) - 15))" bash "$root/tests/gpu/train/dist_x2.sh" "$logs/dist" "$root/build/gpu-train/bin"
  finish dist/summary.md
  ;;
timing | aa)
  with_binaries
  sections=${SECTIONS:-anchor loop}
  if [[ $phase == aa ]]; then
    sections=aa
    # First, what a switch between two processes' GPU work costs (the owner's inputs, then the
    # runner's first kernel): seconds, and it says whether that is the noise in a short call.
    step context-switch 90 python3 "$root/tests/gpu/context_switch_probe.py" 300
    jq -r '.kinds | to_entries[] | "| \(.key) | \(.value.b_host_us.median) | \(.value.b_host_us.p10)–\(.value.b_host_us.p90) | \(.value.b_event_us.median) | \(.value.a_work_us.median) |"' \
      <(sed -n '/^{/,/^}/p' "$logs/context-switch.txt") >"$logs/context-switch.md" 2>/dev/null &&
      sed -i '1i | before the runner | runner launch+sync µs (median) | p10–p90 | its kernel (events) µs | owner work µs |\n|---|---|---|---|---|' "$logs/context-switch.md"
    # Then what the runner's two waits per forward cost a call of 32 forwards (--forward-sync).
    step forward-sync 60 python3 "$root/tests/gpu/forward_sync_probe.py" 60 32
    jq -r '.tasks | to_entries[] | .key as $t | .value | to_entries[] | "| \($t) | \(.key) | \(.value.median_us) | \(.value.cv) |"' \
      <(sed -n '/^{/,/^}/p' "$logs/forward-sync.txt") >"$logs/forward-sync.md" 2>/dev/null &&
      sed -i '1i | task | way | µs per forward (median) | per-call CV |\n|---|---|---|---|' "$logs/forward-sync.md"
    timing_checks
  fi
  step session 600 env SECTIONS="$sections" AA_REPEATS="${AA_REPEATS:-5}" FORWARDS="${FORWARDS:-1}" \
    LOOP_FORWARDS="${LOOP_FORWARDS:-1}" bash "$root/tests/gpu/session_h200.sh" \
    "$bin" "$logs/session" "$root/.anchor/cuda-agent-workspace" "$(($(left) - 20))"
  finish context-switch.md forward-sync.md forward-overlap/results.md owner-off-sm.md session/results.md
  ;;
timer)
  # The GPU call timer (--call-timer gpu, share/harness/stream_flags.py) against the host clock.
  with_binaries
  timer_steps=" ${TIMER_STEPS:-cases aa trace} "
  [[ $timer_steps == *" cases "* ]] && step timer-cases 300 env SECTIONS=cases VERIFY_ARGS="--call-timer gpu" \
    PROFILE_ARGS="--call-timer gpu ${TIMER_PROFILE_ARGS:-}" bash "$root/tests/gpu/session_h200.sh" "$bin" "$logs/timer-cases" "" 280
  [[ $timer_steps == *" trace "* ]] && step timer-trace 300 env CALL_TIMER=gpu \
    bash "$root/tests/gpu/kernel_trace_check.sh" "$bin" "$logs/timer-trace"
  [[ $timer_steps == *" escape "* ]] && step timer-escape 200 \
    bash "$root/tests/gpu/window_escape_check.sh" "$bin" "$logs/timer-escape"
  [[ $timer_steps == *" aa "* ]] && step timer-aa "$(($(left) - 10))" env SECTIONS=aa CALL_WAITS=spin CALL_TIMERS="${CALL_TIMERS:-host gpu}" \
    AA_TASKS="${AA_TASKS:-relu_16m sgemm_2048 sgemm_4096}" AA_REPEATS="${AA_REPEATS:-2}" \
    bash "$root/tests/gpu/session_h200.sh" "$bin" "$logs/timer-aa" "" "$(($(left) - 30))"
  finish timer-cases/results.md timer-escape/results.md timer-aa/results.md timer-trace/summary.md
  ;;
trace)
  # The kernel trace of profile's session: its attack cases and honest example, then A-A repeats
  # (AA_TASKS, default relu_16m sgemm_2048; AA_REPEATS, default 2) with the trace off and on,
  # back to back, so what tracing costs the candidate's arm shows on the same machine.
  with_binaries
  step kernel-trace 300 bash "$root/tests/gpu/kernel_trace_check.sh" "$bin" "$logs/kernel-trace"
  for mode in off on; do
    share=1
    [[ $mode == off ]] && share=2  # half of what is left for each mode
    step "aa-trace-$mode" "$(($(left) / share - 10))" env SECTIONS=aa CALL_WAITS=spin \
      AA_TASKS="${AA_TASKS:-relu_16m sgemm_2048}" AA_REPEATS="${AA_REPEATS:-2}" \
      PROFILE_ARGS="${PROFILE_ARGS:-} --kernel-trace $mode" bash "$root/tests/gpu/session_h200.sh" \
      "$bin" "$logs/aa-trace-$mode" "" "$(($(left) / share - 30))"
  done
  finish kernel-trace/summary.md aa-trace-off/results.md aa-trace-on/results.md
  ;;
data)
  with_binaries
  step filter-check 150 bash "$root/tests/gpu/filter_check.sh" "$bin" "$logs/filter-check"
  step data "$(($(left) - 40))" bash "$root/bench/run_data_bench.sh" --device cuda --bin "$bin" \
    --count "${COUNT:-16000}" --seconds "$(($(left) - 160))" --grace 90 --out "$logs/data"
  step calibrate 30 python3 "$root/bench/calibrate_synth.py" "$logs/data/filtered.jsonl" --json "$logs/data/calibration.json"
  tail -4 "$logs/filter-check.txt" >"$logs/filter-check.md" 2>/dev/null
  cp "$logs/calibrate.txt" "$logs/calibration.md" 2>/dev/null
  finish filter-check.md data.txt calibration.md
  ;;
dataset)
  state_in=${DATASET_STATE:-$root/.data/ops6k}
  if [[ ! -f $state_in/state.json ]]; then
    echo "lease_h200: no prepared state in $state_in (carry .data/ops6k)" >&2
    exit 1
  fi
  rm -rf "$out/ops6k" && cp -r "$state_in" "$out/ops6k" || exit 1
  with_binaries
  # Whether preloading torch.compile's stack in the filter's workers could work here (seconds;
  # FORK_PROBE=1: its answer has not changed on torch 2.11).
  if [[ ${FORK_PROBE:-0} == 1 ]]; then
    step fork-poison 60 python3 "$root/tests/gpu/fork_poison_probe.py"
    { echo '```'; tail -40 "$logs/fork-poison.txt"; echo '```'; } >"$logs/fork-poison.md"
  fi
  # The timing checks of the aa phase (TIMING_CHECKS=1), when a session has no call for aa.
  [[ ${TIMING_CHECKS:-0} == 1 ]] && timing_checks
  # The part stops by SIGTERM 40 s before the phase's end: the filter cuts its running tasks
  # short at once (a later part runs them again; in the H200 parts it ended within 3 s of the
  # signal), and the store is compressed before the files go back.
  step dataset "$(($(left) - 10))" bash "$root/scripts/build_dataset.sh" filter --state "$out/ops6k" --bin "$bin" \
    --seconds "$(($(left) - 40))" --grace 20 ${DATASET_JOBS:+--jobs "$DATASET_JOBS"} --log "$logs/dataset-filter.log"
  bash "$root/scripts/build_dataset.sh" status --state "$out/ops6k" >"$logs/dataset.md" 2>&1
  tail -5 "$logs/dataset.txt" >>"$logs/dataset.md"
  ls -l "$out/ops6k" >>"$logs/dataset.md"
  finish dataset.md fork-poison.md forward-overlap/results.md owner-off-sm.md
  rm -rf "$logs"
  ;;
*)
  echo "lease_h200: unknown phase '$phase' (checks, train, dist, timing, aa, trace, data, dataset)" >&2
  exit 2
  ;;
esac
