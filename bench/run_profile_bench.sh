#!/usr/bin/env bash
# The three cudaagent-profile benchmarks of issue 4 in one call, fitted to a time budget (about six
# minutes on an H200 with warm build caches): A-A (bench/profile_aa.py), throughput with cached
# baselines (bench/profile_throughput.py) and agreement with a plain CUDA-event timing
# (bench/profile_agreement.py). A warm-up profile run first builds the extension objects (a cold
# machine spends a minute or more on torch's precompiled header), so no benchmark's budget pays it.
# Usage: bench/run_profile_bench.sh BIN_DIR OUT [DEVICE]     (DEVICE: cuda, default, or cpu)
# Budgets in seconds: AA_BUDGET (130), TP_BUDGET (70), AG_BUDGET (160); AA_REPEATS (20);
# EXTRA_ARGS are added to every benchmark (e.g. "--no-sandbox" as a diagnostic).
# Prints each benchmark's tables; OUT/{aa,throughput,agreement}.json hold the numbers, OUT/*.jsonl
# and OUT/*-log.txt the records and the tools' messages.
set -uo pipefail
bin=$(cd "$1" && pwd) out=$2 device=${3:-cuda}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
export CUDAAGENT_CACHE_DIR=${CUDAAGENT_CACHE_DIR:-/tmp/cudaagent-gpu-cache}
read -ra extra <<<"${EXTRA_ARGS:-}"
start=$SECONDS
if [[ $device == cuda ]]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu \
    --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
fi

# Warm-up: the extension objects of both kinds of workspace (the self-candidate and the example).
# The self-candidate imports `model`, outside model_new.py's static policy: --no-python-policy.
warm=$(mktemp -d)
trap 'rm -rf "$warm"' EXIT
cp -r "$here/../share/examples/workspaces/bias-relu-$device" "$warm/example"
python3 "$here/profile_bench_lib.py" self-workspace "$warm/self" "$here/tasks/aa/relu_tiny.py" "$device"
"$bin/cudaagent-profile" --quiet --device "$device" --compile-mode none --rounds 2 --round-ms 1 \
  --warmup-ms 0 --no-python-policy "$warm/self" "$warm/example" >"$out/warmup.jsonl" 2>"$out/warmup-log.txt"
status=$?
verdicts=$(grep -o '"verdict":"[A-Z_]*"' "$out/warmup.jsonl" | cut -d'"' -f4 | paste -sd,)
echo "warm-up (builds): exit $status, $((SECONDS - start)) s, verdicts: $verdicts"

step() {
  local name=$1
  shift
  local t0=$SECONDS
  "$@"
  echo "($name: exit $?, $((SECONDS - t0)) s)"
  echo
}
step aa python3 "$here/profile_aa.py" --bin "$bin" --out "$out" --device "$device" \
  --budget-s "${AA_BUDGET:-130}" --repeats "${AA_REPEATS:-20}" "${extra[@]}"
step throughput python3 "$here/profile_throughput.py" --bin "$bin" --out "$out" --device "$device" \
  --budget-s "${TP_BUDGET:-70}" "${extra[@]}"
step agreement python3 "$here/profile_agreement.py" --bin "$bin" --out "$out" --device "$device" \
  --budget-s "${AG_BUDGET:-160}" "${extra[@]}"
echo "all: $((SECONDS - start)) s"
