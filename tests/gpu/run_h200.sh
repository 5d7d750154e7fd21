#!/usr/bin/env bash
# GPU checks for cudaagent-verify on an H200 (or any CUDA machine), writing a Markdown table and
# logs to OUT. Usage: tests/gpu/run_h200.sh BIN_DIR OUT [ANCHOR_WORKSPACE]
#   1. the example CUDA workspace: cold build, one-kernel edit, fully cached re-verify (times);
#   2. the verify catalog cases that are device-independent (no kernels/*.cpp), on the CUDA base
#      (those with `flags` --no-python-policy in a set of their own), the GPU cases, the GEMM
#      controls, and issue 10's softmax tolerance cases (float32 and bfloat16);
#   3. CUDA Agent's own example workspace, unchanged, through our verifier (must PASS), and its
#      released scripts timed on the same GPU as the anchor, when ANCHOR_WORKSPACE is given.
# Binaries built on Debian 12 run there with LD_LIBRARY_PATH pointing at carried libraries
# (tests/gpu/device_env.sh). Environment knobs, to fit a run into the device time at hand:
#   KEEP_CACHE (0: start from an empty build cache), GPU_CASES (a glob of tests/gpu/cases/; *),
#   EDIT_ITERATIONS (6), SETS ("catalog gpu-cases gemm-controls conv-controls softmax-tolerance"), CASE_TIMEOUT (20 s),
#   CASE_SHARDS (1: the verifier processes a set is split over, run side by side), VERIFY_ARGS (more
#   cudaagent-verify arguments for every set, split at spaces: "--call-timer gpu").
set -uo pipefail
shopt -s extglob  # GPU_CASES may be a pattern list such as @(g05-*|g-*)
bin=$1 out=$2 anchor=${3:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
base=$root/share/examples/workspaces/bias-relu-cuda
source "$root/tests/verify/case_lib.sh"
mkdir -p "$out" || exit 2
export CUDAAGENT_CACHE_DIR=${CUDAAGENT_CACHE_DIR:-/tmp/cudaagent-gpu-cache}
# A cold first build is part of what section 1 measures; KEEP_CACHE=1 keeps another script's
# build cache (the precompiled torch header alone costs a minute) when the cold time is not wanted.
[[ ${KEEP_CACHE:-0} == 1 ]] || rm -rf "$CUDAAGENT_CACHE_DIR"
table=$out/results.md
log=$out/log.txt
echo "| check | expected | got | seconds | detail |" >"$table"
echo "|---|---|---|---|---|" >>"$table"
failures=0

verify() {  # name expected workspace [task] [extra args...]
  local name=$1 expected=$2 ws=$3 task=${4:-$base/model.py}
  shift 4 2>/dev/null || shift 3
  local start end record verdict reason
  start=$(date +%s.%N)
  record=$("$bin/cudaagent-verify" --quiet --device cuda --task "$task" "$@" "$ws" 2>>"$log")
  end=$(date +%s.%N)
  echo "$record" >>"$out/records.jsonl"
  verdict=$(jq -r '.verify.verdict // .error.reason' <<<"$record")
  reason=$(jq -r '.verify.reason // ""' <<<"$record" | tr '|' '/' | cut -c1-120)
  local seconds
  seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
  echo "| $name | $expected | $verdict | $seconds | $reason |" >>"$table"
  [[ $verdict == "$expected" ]] || failures=$((failures + 1))
  LAST_RECORD=$record
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >>"$log" 2>&1
"$bin/cudaagent-verify" --version >>"$log" 2>&1

# 1. The agent's inner loop through one long-lived verifier: cold first iteration (empty cache,
#    workers starting), then five one-kernel edits with warm workers.
work=$(mktemp -d)
"$root/bench/verify_edit_loop.sh" "$bin" "$base" kernels/bias_relu.cu cuda "${EDIT_ITERATIONS:-6}" "$out/edit-loop.jsonl" \
  >"$out/edit-loop.txt" 2>>"$log"
i=0
while IFS=$'\t' read -r seconds verdict timings; do
  i=$((i + 1))
  label="example, edit loop iteration $i"
  [[ $i == 1 ]] && label="example, edit loop iteration 1 (cold)"
  echo "| $label | PASS | $verdict | $seconds | $timings |" >>"$table"
  [[ $verdict == PASS ]] || failures=$((failures + 1))
done <"$out/edit-loop.txt"
jq -c '.verify.build.steps' "$out/edit-loop.jsonl" >>"$log"

# 2. Case sets, each through one verifier process (warm workers; a case that hangs or crashes
#    costs its job, the next case gets a fresh child). A case directory overlays a base workspace
#    (tests/verify/case_lib.sh); `expected` lists the accepted verdicts, space-separated.
overlay_set() {  # label base task cases_root skip_cpp_cases [verify flag]
  local label=$1 set_base=$2 task=$3 cases_root=$4 skip_cpp=$5 flag=${6:-} dirs=() case_dir name ws
  mkdir -p "$work/$label"
  for case_dir in "$cases_root"/${CASE_GLOB:-*}/; do
    name=$(basename "$case_dir")
    [[ -f $case_dir/expected ]] || continue
    # Cases with their own task or a pending verdict are left to the CPU catalog; a set with a
    # verify flag takes exactly the cases whose `flags` file holds it.
    [[ -f $case_dir/task.py || -f $case_dir/pending ]] && continue
    [[ $(cat "$case_dir/flags" 2>/dev/null) == "$flag" ]] || continue
    if [[ $skip_cpp == yes ]] && find "$case_dir" -name '*.cpp' | grep -q .; then continue; fi
    ws=$work/$label/$name
    assemble_case "${case_dir%/}" "$set_base" "$ws"
    dirs+=("$ws")
  done
  local start end record expected verdict reason
  start=$(date +%s.%N)
  # Through a pipe, so each record is flushed as it is made (a run cut short keeps them). With
  # CASE_SHARDS=N, N verifier processes take a shard each (--shard), side by side on the GPU.
  local shards=${CASE_SHARDS:-1} shard
  for ((shard = 0; shard < shards; shard++)); do
    "$bin/cudaagent-verify" --quiet --device cuda --task "$task" --timeout "${CASE_TIMEOUT:-20}" \
      --shard "$shard/$shards" $flag ${VERIFY_ARGS:-} "${dirs[@]}" 2>>"$log" | cat >"$out/$label.shard$shard.jsonl" &
  done
  wait
  cat "$out/$label".shard*.jsonl >"$out/$label.jsonl" && rm -f "$out/$label".shard*.jsonl
  end=$(date +%s.%N)
  while read -r record; do
    name=$(jq -r .id <<<"$record")
    expected=$(cat "$cases_root/$name/expected")
    verdict=$(jq -r '.verify.verdict // .error.reason' <<<"$record")
    reason=$(jq -r '.verify.reason // ""' <<<"$record" | tr '|' '/' | cut -c1-120)
    echo "| $label $name | $expected | $verdict | $(jq -r '.verify.timings_s.total' <<<"$record" | cut -c1-5) | $reason |" >>"$table"
    [[ " $expected " == *" $verdict "* ]] || failures=$((failures + 1))
  done <"$out/$label.jsonl"
  [[ $(wc -l <"$out/$label.jsonl") == "${#dirs[@]}" ]] || {
    echo "| $label | ${#dirs[@]} records | $(wc -l <"$out/$label.jsonl") records | | |" >>"$table"
    failures=$((failures + 1))
  }
  echo "| $label, ${#dirs[@]} cases in $shards process(es) | | | $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') | wall time |" >>"$table"
}
# The CPU catalog's device-independent cases, the GPU cases (tests/gpu/cases: numeric, memory,
# crash and hang attacks in .cu, plus stream controls), and the GEMM honest controls (naive,
# tiled, cuBLAS) on their own task.
sets=" ${SETS:-catalog gpu-cases gemm-controls conv-controls softmax-tolerance} "
[[ $sets == *" catalog "* ]] && overlay_set catalog "$base" "$base/model.py" "$root/tests/verify/cases" yes
# The catalog's cases of the layers beneath model_new.py's static policy, with it off.
[[ $sets == *" catalog "* ]] &&
  overlay_set catalog-runtime "$base" "$base/model.py" "$root/tests/verify/cases" yes --no-python-policy
[[ $sets == *" gpu-cases "* ]] && CASE_GLOB=${GPU_CASES:-*} overlay_set gpu-cases "$base" "$base/model.py" "$root/tests/gpu/cases" no
gemm=$root/tests/gpu/tasks/linear-relu
mkdir -p "$work/gemm-base" && cp "$gemm/model.py" "$work/gemm-base/"
[[ $sets == *" gemm-controls "* ]] && overlay_set gemm-controls "$work/gemm-base" "$gemm/model.py" "$gemm" no
# The convolution control (issue 10): cuDNN for the convolution, a kernel of our own for the rest.
conv=$root/tests/gpu/tasks/conv2d-bias
mkdir -p "$work/conv-base" && cp "$conv/model.py" "$work/conv-base/"
[[ $sets == *" conv-controls "* ]] && overlay_set conv-controls "$work/conv-base" "$conv/model.py" "$conv" no
# Issue 10, class 3: a softmax over 8192 columns (outputs near 1e-4), wrong and honest, in float32
# and bfloat16.
for softmax in softmax-8192 softmax-8192-bf16; do
  mkdir -p "$work/$softmax-base" && cp "$root/tests/gpu/tasks/$softmax/model.py" "$work/$softmax-base/"
  [[ $sets == *" softmax-tolerance "* ]] &&
    overlay_set "$softmax" "$work/$softmax-base" "$root/tests/gpu/tasks/$softmax/model.py" "$root/tests/gpu/tasks/$softmax" no
done

# 3. CUDA Agent's example workspace, unchanged, and its own scripts as the anchor.
if [[ -n $anchor && -d $anchor ]]; then
  cp -r "$anchor" "$work/anchor"
  verify "CUDA Agent example (ours)" PASS "$work/anchor" "$work/anchor/model.py"
  (
    cd "$work/anchor"
    for step in "bash utils/compile.sh" "touch kernels/axpby.cu" "bash utils/compile.sh" \
                "python3 -m utils.verification" "python3 -m utils.profiling"; do
      start=$(date +%s.%N)
      $step >>"$log" 2>&1
      code=$?
      end=$(date +%s.%N)
      echo "| anchor: $step | exit 0 | exit $code | $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') | CUDA Agent's released script |" >>"$table"
    done
  )
fi
rm -rf "$work"
echo "failures: $failures" | tee -a "$table"
exit $((failures > 0))
