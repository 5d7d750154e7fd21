#!/usr/bin/env bash
# GPU check of the CUPTI injection library (lib/cuda/cupti_inject/): every kernel on every stream
# is traced with the right launcher class, stream and CLOCK_MONOTONIC times, nothing is dropped,
# forked job children trace to their own files, and what the injection costs per launch.
# Needs a built tree (build/<preset>/lib/libcudaagent_cupti.so; bin/trace_summary is used when
# present) and a Python with CUDA torch; nvcc builds the test's own kernel .so.
#
# Usage: tests/gpu/cupti_check.sh LOG_DIR [BUILD_DIR]     (BUILD_DIR: build/release)
# Environment: PYTHON (python3), NVCC (nvcc on PATH, else /usr/local/cuda/bin/nvcc),
#              CUDA_ARCH (sm_90).
# Exit 0 when every check passes, 1 otherwise; the report is LOG_DIR/report.txt.
set -uo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: $0 LOG_DIR [BUILD_DIR]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1" || exit 1
log=$(cd "$1" && pwd)
build=$(cd "${2:-$root/build/release}" && pwd) || exit 1
python=${PYTHON:-python3}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
library=$build/lib/libcudaagent_cupti.so
helper=$build/bin/trace_summary
driver=$root/tests/gpu/cupti_check.py
fail() {
  echo "cupti_check: $*" | tee -a "$log/report.txt" >&2
  exit 1
}
: >"$log/report.txt"
[[ -f $library ]] || fail "no injection library at $library (build the cudaagent_cupti target)"
rm -f "$log"/trace-*.jsonl "$log"/overhead-*

{
  echo "date: $(date -u +%FT%TZ)"
  echo "library: $library"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1
  "$python" -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "python", sys.version.split()[0]); assert torch.cuda.is_available()' 2>&1
} >"$log/environment.txt" || fail "no CUDA torch in $python: $(cat "$log/environment.txt")"
cat "$log/environment.txt"

"$nvcc" -shared -cudart shared -Xcompiler -fPIC -O2 -arch="${CUDA_ARCH:-sm_90}" -o "$log/libcupti_check_custom.so" \
  "$root/tests/gpu/cupti_custom_kernel.cu" >"$log/nvcc.log" 2>&1 || fail "nvcc failed: $(cat "$log/nvcc.log")"
custom=$log/libcupti_check_custom.so

traced() {  # traced TRACE_PATTERN COMMAND...: runs a command under the injection
  local pattern=$1
  shift
  CUDA_INJECTION64_PATH=$library CUDAAGENT_CUPTI_OUT=$pattern "$@"
}

echo "== run: torch elementwise, matmul, ctypes kernel, side stream, background thread"
traced "$log/trace-%p.jsonl" "$python" "$driver" run --custom "$custom" --marks "$log/marks.json" \
  >"$log/run.log" 2>&1 || fail "run failed: $(tail -20 "$log/run.log")"
echo "== fork: a job child of a parent that never touched CUDA"
traced "$log/trace-%p.jsonl" "$python" "$driver" fork --marks "$log/fork.json" \
  >"$log/fork.log" 2>&1 || fail "fork failed: $(tail -20 "$log/fork.log")"
echo "== overhead: 10k small launches, without and with the injection"
"$python" "$driver" overhead --custom "$custom" --mode plain --out "$log/overhead-plain.json" \
  >"$log/overhead-plain.log" 2>&1 || fail "overhead plain failed: $(tail -20 "$log/overhead-plain.log")"
CUDAAGENT_CUPTI_PROVENANCE=0 traced "$log/overhead-activity_only-%p.jsonl" "$python" "$driver" overhead \
  --custom "$custom" --mode activity_only --out "$log/overhead-activity_only.json" \
  >"$log/overhead-activity_only.log" 2>&1 || fail "overhead activity_only failed: $(tail -20 "$log/overhead-activity_only.log")"
traced "$log/overhead-full-%p.jsonl" "$python" "$driver" overhead --custom "$custom" --mode full \
  --out "$log/overhead-full.json" >"$log/overhead-full.log" 2>&1 ||
  fail "overhead full failed: $(tail -20 "$log/overhead-full.log")"

echo "== check"
"$python" "$driver" check --marks "$log/marks.json" --fork-marks "$log/fork.json" --trace-dir "$log" \
  --helper "$helper" 2>&1 | tee -a "$log/report.txt"
status=${PIPESTATUS[0]}
# The overhead traces hold ~100k kernels each (tens of MB): keep only their last lines.
for trace in "$log"/overhead-*-*.jsonl; do
  [[ -f $trace ]] && tail -n 3 "$trace" >"$trace.tail" && rm -f "$trace"
done
exit $((status == 0 ? 0 : 1))
