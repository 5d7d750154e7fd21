#!/usr/bin/env bash
# PM-sampling probe, one device call: bash tests/gpu/pm_sampling/run.sh $OUT
# Compiles probe.cu, lists the chip's PM-sampling base metrics, finds which
# sampling intervals SetConfig accepts, measures an idle baseline, then runs
# the matrix interval x kernel length (trusted sampler around a separate
# workload process) and analyses each pair. Writes OUT/summary.md and prints it.
# Exit 77: no CUDA device/driver here (after a successful compile). Exit 3: refused on a real
# device unless PM_SAMPLING_MAY_BREAK_THE_GPU=yes (it broke the lent H200 once: README.md).
# Env: METRICS (comma list, default gr__cycles_active.avg,gr__cycles_elapsed.max,sm__cycles_active.avg)
#      INTERVALS (matrix, default "1000 5000"), KERNELS_US (default "20 100 500"),
#      COUNT (200), GAP_US (1000), PROBE_INTERVALS (SetConfig acceptance, default "100 250 500 1000 2000 5000")
set -u -o pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-/tmp/pm_sampling_out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$(mktemp -d /tmp/pm_sampling.XXXXXX)" # raw samples are large: kept out of OUT
trap 'rm -rf "$WORK"' EXIT
METRICS="${METRICS:-gr__cycles_active.avg,gr__cycles_elapsed.max,sm__cycles_active.avg}"
INTERVALS="${INTERVALS:-1000 5000}"
KERNELS_US="${KERNELS_US:-20 100 500}"
COUNT="${COUNT:-200}"
GAP_US="${GAP_US:-1000}"
PROBE_INTERVALS="${PROBE_INTERVALS:-100 250 500 1000 2000 5000}"
BUDGET_S="${BUDGET_S:-240}" # whole script; later steps are skipped, not cut short mid-way
START_S=$SECONDS
# seconds a step may take: its own cap, or what is left of the budget
# (never below 1: `timeout 0` would mean no limit at all)
left() { local l=$((BUDGET_S - (SECONDS - START_S))); [ "$l" -lt 1 ] && l=1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
SUMMARY="$OUT/summary.md"
LOG="$OUT/log.txt"
: >"$LOG"
log() { echo "$*" | tee -a "$LOG" >&2; }

# --- find CUDA: headers with PM sampling, nvcc, libcupti + libnvperf_host ---
CUDA=""
for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-13 /usr/local/cuda-12.9 /usr/local/cuda-12.8; do
  [ -n "$d" ] && [ -f "$d/include/cupti_pmsampling.h" ] && [ -x "$d/bin/nvcc" ] && { CUDA="$d"; break; }
done
if [ -z "$CUDA" ]; then log "run.sh: no CUDA toolkit with cupti_pmsampling.h and nvcc found"; exit 1; fi
CUPTI_LIB=""
for d in "$CUDA/lib64" "$CUDA/lib" "$CUDA/extras/CUPTI/lib64" "$CUDA/targets/x86_64-linux/lib"; do
  [ -e "$d/libcupti.so" ] && [ -e "$d/libnvperf_host.so" ] && { CUPTI_LIB="$d"; break; }
done
if [ -z "$CUPTI_LIB" ]; then log "run.sh: libcupti.so/libnvperf_host.so not found under $CUDA"; exit 1; fi
# libcuda: the driver's if the loader knows it, else the toolkit stub for linking only
# (never on the rpath, so the real driver is what runs).
STUBS=""
ldconfig -p 2>/dev/null | grep -q 'libcuda\.so ' || STUBS="-L$CUDA/lib64/stubs -L$CUDA/lib/stubs -L$CUDA/targets/x86_64-linux/lib/stubs"
export LD_LIBRARY_PATH="$CUPTI_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PROBE="$WORK/probe"
log "run.sh: CUDA $CUDA, CUPTI libs $CUPTI_LIB, work dir $WORK"
# sm_90 (H100/H200) SASS plus compute_90 PTX so newer GPUs JIT it.
if ! timeout 150 "$CUDA/bin/nvcc" -std=c++17 -O2 -Xcompiler -Wall,-Wextra \
    -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -I"$CUDA/include" "$HERE/probe.cu" -o "$PROBE" \
    -L"$CUPTI_LIB" $STUBS -lcupti -lnvperf_host -lcuda \
    -Xlinker -rpath -Xlinker "$CUPTI_LIB" >>"$LOG" 2>&1; then
  log "run.sh: compile FAILED (see $LOG)"; tail -30 "$LOG"; exit 1
fi
log "run.sh: compiled $PROBE"
if [ -n "${PM_PROBE_FAKE:-}" ]; then
  # self-test without a GPU: a synthetic stand-in for the probe (fake_probe.py)
  PROBE="$(cd "$(dirname "$PM_PROBE_FAKE")" && pwd)/$(basename "$PM_PROBE_FAKE")"
  log "run.sh: PM_PROBE_FAKE set: using $PROBE, results are synthetic"
fi

# On the lent H200 (a virtual machine, SR-IOV) the first run of this probe, on 2026-12-02, left the
# GPU needing a reset: the 1000 ns runs overflowed the hardware buffer, the next CUDA context failed
# with CUDA_ERROR_UNKNOWN and the kernel log said NV_ERR_RESET_REQUIRED. A GPU is never to be reset
# from here, so the probe runs on a real device only when asked in so many words.
if [ -z "${PM_PROBE_FAKE:-}" ] && [ "${PM_SAMPLING_MAY_BREAK_THE_GPU:-}" != "yes" ]; then
  log "run.sh: refused: PM sampling left the lent H200 needing a GPU reset (see README.md)."
  log "run.sh: set PM_SAMPLING_MAY_BREAK_THE_GPU=yes only on a machine you may reset yourself."
  exit 3
fi

timeout 60 "$PROBE" devices >>"$LOG" 2>&1
rc=$?
if [ $rc -eq 77 ] || [ $rc -eq 127 ]; then
  # 127: the loader could not find libcuda.so.1, i.e. no NVIDIA driver on this machine
  log "run.sh: no CUDA device or driver here (probe devices rc=$rc: $(tail -1 "$LOG")). Compile OK; nothing to measure."
  exit 77
fi
[ $rc -eq 0 ] || { log "run.sh: probe devices failed rc=$rc"; tail -20 "$LOG"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >>"$LOG" 2>&1 || true

{
  echo "# PM sampling probe"
  echo
  echo "- date: $(date -u +%FT%TZ), host $(hostname)"
  echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "- metrics: $METRICS; workload: N=$COUNT spin kernels, gap ${GAP_US} us"
  echo
} >"$SUMMARY"

# --- 1. the chip's PM-sampling base metrics (what the lead needs if ours are refused) ---
timeout "$(left 60)" "$PROBE" sample --list-metrics >"$WORK/probe_list.out" 2>"$OUT/base_metrics.txt"
rc=$?
echo "## Base metrics: rc=$rc, $(grep -c '^  ' "$OUT/base_metrics.txt") names in base_metrics.txt" >>"$SUMMARY"
grep -E '^  (gr__|sm__cycles|gpu__|sys__|gpc__cycles)' "$OUT/base_metrics.txt" | head -40 | sed 's/^  /- /' >>"$SUMMARY"
echo >>"$SUMMARY"

# Smoke test of the full sampler path (5 us interval around \`true\`). Exit 2
# means the metrics were refused: fall back to smaller sets (first = active
# cycles, second = elapsed cycles, as analyse.py expects) before giving up,
# since the lead gets one device call.
for cand in "$METRICS" ${FALLBACK_METRICS:-gr__cycles_active.avg,gr__cycles_elapsed.max sm__cycles_active.avg,sm__cycles_elapsed.avg gr__cycles_active.sum,gr__cycles_elapsed.sum}; do
  timeout "$(left 60)" "$PROBE" sample --interval-ns 5000 --metrics "$cand" --out "$WORK/smoke.jsonl" -- true \
    >/dev/null 2>"$WORK/smoke.err"
  rc=$?
  cat "$WORK/smoke.err" >>"$LOG"
  echo "Smoke test (sampler around \`true\`, 5000 ns, metrics $cand): rc=$rc: $(tail -1 "$WORK/smoke.err")" >>"$SUMMARY"
  echo >>"$SUMMARY"
  [ $rc -eq 2 ] || { METRICS="$cand"; break; }
  cp "$WORK/smoke.err" "$OUT/metric_refused.txt"
done
if [ $rc -eq 2 ]; then
  cp "$WORK/smoke.err" "$OUT/metric_refused.txt"
  echo "**Requested metrics refused; stopping. Pick from base_metrics.txt and rerun with METRICS=...**" >>"$SUMMARY"
  cat "$SUMMARY"; exit 2
fi
echo "Metrics used from here on: $METRICS" >>"$SUMMARY"
echo >>"$SUMMARY"

# --- 2. idle baseline: busy time seen with nothing of ours running ---
echo "## Idle baseline (sampling around \`sleep 0.3\`, 1000 ns)" >>"$SUMMARY"
timeout "$(left 60)" "$PROBE" sample --interval-ns 1000 --eval-budget-s 30 --metrics "$METRICS" --out "$WORK/idle.jsonl" -- sleep 0.3 \
  >/dev/null 2>>"$LOG" && timeout "$(left 60)" python3 "$HERE/analyse.py" --idle "$WORK/idle.jsonl" --json "$OUT/idle.json" >>"$SUMMARY" 2>>"$LOG" \
  || echo "idle baseline failed (see log.txt)" >>"$SUMMARY"
echo >>"$SUMMARY"

# --- 3. the matrix: trusted sampler around a separate workload process ---
echo "## Matrix" >>"$SUMMARY"
echo >>"$SUMMARY"
echo "| interval ns | D us | event us | PM est us (mapped) | ratio | CV | outside us/kernel | PM est us (shifted) | shift us | PM est us (globaltimer win) | ratio to gt span | wall s |" >>"$SUMMARY"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|" >>"$SUMMARY"
DETAILS="$WORK/details.md"
: >"$DETAILS"
run_pair() { # interval D [extra sampler flags...]
  local iv=$1 d=$2; shift 2
  local tag="iv${iv}_d${d}${1:+_$(echo "$*" | tr -d ' -')}"
  local s="$WORK/samples_$tag.jsonl" w="$OUT/workload_$tag.jsonl"
  if [ "$(left 90)" -lt 20 ]; then
    echo "| $iv | $d $* | skipped: time budget | | | | | | | | | |" >>"$SUMMARY"; return
  fi
  local t0 tl rc t1 wall
  t0=$(date +%s.%N)
  tl=$(left 90)
  # the sampler stops evaluating (and says so) well before the timeout kills it
  timeout "$tl" "$PROBE" sample --interval-ns "$iv" --metrics "$METRICS" --out "$s" --handshake \
    --eval-budget-s $((tl > 30 ? tl - 20 : 10)) ${SAMPLER_FLAGS:-} "$@" -- \
    "$PROBE" workload --kernel-us "$d" --count "$COUNT" --gap-us "$GAP_US" --out "$w" \
    >>"$LOG" 2>>"$LOG"
  rc=$?
  t1=$(date +%s.%N)
  wall=$(python3 -c "print(f'{$t1-$t0:.1f}')")
  if [ $rc -ne 0 ]; then
    echo "| $iv | $d | run failed rc=$rc ($*) | | | | | | | | | $wall |" >>"$SUMMARY"; return
  fi
  echo "### $tag" >>"$DETAILS"
  if timeout "$(left 60)" python3 "$HERE/analyse.py" "$s" "$w" --json "$OUT/analysis_$tag.json" >>"$DETAILS" 2>>"$LOG"; then
    python3 - "$OUT/analysis_$tag.json" "$iv" "$d" "$wall" "$*" >>"$SUMMARY" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); iv, d, wall, extra = sys.argv[2:6]
if "error" in r:
    print(f"| {iv} | {d} | {r['error']} | | | | | | | | | {wall} |"); sys.exit()
lab = f"{d} {extra}".strip()
print(f"| {iv} | {lab} | {r['event_us_median']:.2f} | {r['mapped_est_us_median']:.2f} | {r['mapped_ratio_to_event']:.3f} | "
      f"{r['mapped_est_cv']:.3f} | {r['mapped_busy_outside_per_kernel_us']:.2f} | {r['shifted_est_us_median']:.2f} | "
      f"{r['host_shift_us']:.1f} | {r['gt_est_us_median']:.2f} | {r['gt_ratio_to_globaltimer']:.3f} | {wall} |")
EOF
  else
    echo "| $iv | $d | analysis failed | | | | | | | | | $wall |" >>"$SUMMARY"
  fi
  # keep, for later inspection, the header, every sample with any activity
  # (first metric non-zero) and every 100th sample
  awk 'NR==1 || NR%100==0 || $0 !~ /"v":\[0,/' "$s" | gzip -c >"$OUT/samples_${tag}_active.jsonl.gz"
  rm -f "$s"
}
for iv in $INTERVALS; do
  for d in $KERNELS_US; do run_pair "$iv" "$d"; done
done
# Does the sampler need a context of its own? (one cheap extra run)
run_pair 5000 100 --no-context
echo >>"$SUMMARY"

# --- 5. which sampling intervals does SetConfig accept (GPU-time trigger) ---
echo "## Interval acceptance (sampling around \`sleep 0.05\`)" >>"$SUMMARY"
echo >>"$SUMMARY"
echo "| interval ns | rc | samples | median sample ns | overflow | note |" >>"$SUMMARY"
echo "|---|---|---|---|---|---|" >>"$SUMMARY"
# last row: the SYSCLK trigger (interval in sys-clock cycles), the fallback if
# the GPU-time trigger were refused
for iv in $PROBE_INTERVALS sysclk1000; do
  extra=""
  if [ "$iv" = sysclk1000 ]; then extra="--sysclk"; iv=1000; fi
  f="$WORK/accept_$iv$extra.jsonl"
  [ "$(left 30)" -ge 10 ] || { echo "| $iv | | | | | skipped: time budget |" >>"$SUMMARY"; continue; }
  timeout "$(left 30)" "$PROBE" sample --interval-ns "$iv" $extra --eval-budget-s 15 --metrics "$METRICS" --out "$f" -- sleep 0.05 \
    >/dev/null 2>"$WORK/accept.err"
  rc=$?
  cat "$WORK/accept.err" >>"$LOG"
  [ -n "$extra" ] && iv="$iv cycles (sysclk)"
  if [ $rc -eq 0 ] && [ -s "$f" ]; then
    python3 "$HERE/analyse.py" --idle "$f" --json "$WORK/accept.json" >/dev/null 2>>"$LOG"
    read -r n med ov < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["samples"], r["sample_ns_median"], r["overflow"])' "$WORK/accept.json")
    echo "| $iv | 0 | $n | $med | $ov | |" >>"$SUMMARY"
  else
    echo "| $iv | $rc | | | | $(tail -1 "$WORK/accept.err" | tr '|' '/') |" >>"$SUMMARY"
  fi
done
echo >>"$SUMMARY"
echo "(total wall $((SECONDS - START_S)) s of a ${BUDGET_S} s budget)" >>"$SUMMARY"
echo >>"$SUMMARY"
echo "## Details" >>"$SUMMARY"
cat "$DETAILS" >>"$SUMMARY"
cat "$SUMMARY"
