#!/usr/bin/env bash
# Every GPU check in one device call, fitted to a time budget: verify's GPU cases and GEMM controls
# (run_h200.sh) in the background while the sandbox CUDA-start ladder and the CUPTI check run,
# then the profile checks alone on the GPU (their timing must not share it) until the deadline.
# Usage: tests/gpu/all_h200.sh BIN_DIR BUILD_DIR OUT [SECONDS]   (default 560)
set -uo pipefail
bin=$1 build=$2 out=$3 budget=${4:-560}
root=$(cd "$(dirname "$0")/../.." && pwd)
deadline=$((SECONDS + budget))
left() { echo $((deadline - SECONDS)); }
export CUDAAGENT_CACHE_DIR=/tmp/cudaagent-gpu-cache
mkdir -p "$out"/{verify,sandbox,cupti,profile}
echo "start $(date -u +%FT%TZ) budget ${budget}s" >"$out/steps.txt"
EDIT_ITERATIONS=${EDIT_ITERATIONS:-1} SETS=${SETS:-"gpu-cases gemm-controls"} CASE_TIMEOUT=${CASE_TIMEOUT:-8} \
  timeout "$(left)" "$root/tests/gpu/run_h200.sh" "$bin" "$out/verify" >"$out/verify/stdout.txt" 2>&1 &
verify_pid=$!
sleep 2  # run_h200.sh empties the shared build cache first
timeout 90 "$root/tests/gpu/sandbox_cuda_timing.sh" "$bin" "$out/sandbox" >"$out/sandbox/stdout.txt" 2>&1
echo "sandbox ladder: exit $? at ${SECONDS}s" >>"$out/steps.txt"
timeout 150 "$root/tests/gpu/cupti_check.sh" "$out/cupti" "$build" >"$out/cupti/stdout.txt" 2>&1
echo "cupti check: exit $? at ${SECONDS}s" >>"$out/steps.txt"
wait "$verify_pid"
echo "verify cases: exit $? at ${SECONDS}s" >>"$out/steps.txt"
if (($(left) > 60)); then
  timeout "$(left)" "$root/tests/gpu/profile_check.sh" "$bin" "$out/profile" "${AA_REPEATS:-3}" \
    >"$out/profile/stdout.txt" 2>&1
  echo "profile check: exit $? at ${SECONDS}s" >>"$out/steps.txt"
else
  echo "profile check: not run, $(left)s left" >>"$out/steps.txt"
fi
cat "$out/steps.txt"
