#!/usr/bin/env bash
# GPU check of cudaagent-profile --kernel-trace (the CUPTI kernel gates) on an H200 or any CUDA
# machine. Usage: tests/gpu/profile_cupti.sh BIN_DIR BUILD_DIR OUT
#   BIN_DIR    the programs (cudaagent-profile)
#   BUILD_DIR  the build tree holding lib/libcudaagent_cupti.so (build the cudaagent_cupti target)
#   OUT        records (*.jsonl), stderr of each run (*.log) and table.md are written here
# Cases, each one cudaagent-profile run on a copy of the example CUDA workspace:
#   honest           the example: PASS, its own kernel on top of the table, no trace flag
#   honest-untraced  the same without --kernel-trace: the tracing's cost on the candidate's time
#   side-stream      honest work on a side stream (tests/gpu/cases/control-side-stream): PASS
#   background       a daemon thread launching GPU work on its own stream, also between rounds
#                    (the baselines' turn): FLAG_HACK (work_between_commands / work_outside_calls)
#   torch-fallback   forward() computes with torch, the extension does a trivial part:
#                    FLAG_HACK (kernel_fallback)
# Prints a compact table to stdout (also OUT/table.md); exit 0 when every case got its expected
# verdict and its expected flags, 1 otherwise. Extra profile flags: PROFILE_ARGS (e.g.
# "--allow-unsandboxed" where the sandbox probe fails). Takes about 2-3 minutes (one build, five
# profiles with --compile-mode none).
set -uo pipefail
if [[ $# -ne 3 ]]; then
  echo "usage: $0 BIN_DIR BUILD_DIR OUT" >&2
  exit 2
fi
bin=$(cd "$1" && pwd) || exit 1
build=$(cd "$2" && pwd) || exit 1
mkdir -p "$3" || exit 1
out=$(cd "$3" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
base=$root/share/examples/workspaces/bias-relu-cuda
library=$build/lib/libcudaagent_cupti.so
export CUDAAGENT_CACHE_DIR=${CUDAAGENT_CACHE_DIR:-/tmp/cudaagent-gpu-cache}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
table=$out/table.md
failures=0
say() { echo "$*" | tee -a "$table"; }
die() {
  echo "profile_cupti: $*" >&2
  exit 1
}
[[ -x $bin/cudaagent-profile ]] || die "no $bin/cudaagent-profile"
[[ -f $library ]] || die "no injection library at $library (cmake --build BUILD_DIR --target cudaagent_cupti)"
command -v jq >/dev/null || die "jq is needed"
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  "$bin/cudaagent-profile" --version
} >"$out/environment.txt" 2>&1
: >"$table"

# workspace NAME: a fresh copy of the example.
workspace() {
  rm -rf "${work:?}/$1"
  cp -r "$base" "$work/$1"
  echo "$work/$1"
}

# run NAME EXPECTED_VERDICT "FLAGS THAT MUST BE RAISED" [profile args...] WORKSPACE
# (the workspace is the last argument). Logs the command and, on a mismatch, the record's reason,
# flags and the tail of stderr.
run() {
  local name=$1 expected=$2 want_flags=$3
  shift 3
  local record=$out/$name.jsonl log=$out/$name.log start seconds
  start=$(date +%s.%N)
  echo "+ cudaagent-profile --device cuda --compile-mode none ${PROFILE_ARGS:-} $*" >"$log"
  # shellcheck disable=SC2086
  "$bin/cudaagent-profile" --device cuda --compile-mode none --task "$base/model.py" ${PROFILE_ARGS:-} "$@" \
    >"$record" 2>>"$log"
  local code=$?
  seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  local verdict raised kernel top median
  verdict=$(jq -r '.profile.verdict // .error.reason // "no record"' "$record" 2>/dev/null || echo "no record")
  raised=$(jq -r '[.profile.flags[]? | select(.raised) | .name] | join(",")' "$record" 2>/dev/null)
  kernel=$(jq -r '.profile.kernel_trace | if . == null then "-" else
      "\(.kernel_ms * 1000 | round / 1000)/\(.event_ms * 1000 | round / 1000)" end' "$record" 2>/dev/null)
  top=$(jq -r '.profile.kernels | if . == null or length == 0 then "-" else
      .[0] | "\(.class) \(.share * 100 | round)% \(.name | .[0:40])" end' "$record" 2>/dev/null)
  median=$(jq -r '.profile.times_ms.candidate.median // "-"' "$record" 2>/dev/null)
  local ok=yes
  [[ $code == 0 && $verdict == "$expected" ]] || ok=no
  for flag in $want_flags; do
    [[ ",$raised," == *",$flag,"* ]] || ok=no
  done
  say "| $name | $expected ${want_flags:+($want_flags)} | $verdict | ${raised:-none} | $kernel | $median | $top | $seconds | $ok |"
  if [[ $ok == no ]]; then
    failures=$((failures + 1))
    {
      echo "---- $name: exit $code, expected $expected with flags [$want_flags]"
      jq -c '.profile | {reason, kernels_status, flags: [.flags[]? | select(.raised) | {name, reason}],
             escaped: .kernel_trace.escaped_ms, health: .kernel_trace.health}' "$record" 2>&1 | cut -c1-2000
      tail -n 20 "$log"
    } >&2
  fi
}

say "| case | expected | verdict | raised flags | kernel/event ms | candidate median ms | top kernel | s | ok |"
say "|---|---|---|---|---|---|---|---|---|"

honest=$(workspace honest)
run honest PASS "" --kernel-trace-library "$library" "$honest"
run honest-untraced PASS "" "$honest"

side=$(workspace side-stream)
cp "$root/tests/gpu/cases/control-side-stream/kernels/bias_relu_binding.cpp" "$side/kernels/"
run side-stream PASS "" --kernel-trace-library "$library" "$side"

background=$(workspace background)
cat >"$background/model_new.py" <<'PY'
import threading
import time

import torch
import torch.nn as nn

import cuda_extension


def _spin():
    # GPU work of our own, on a stream of our own, from a thread of our own, forever: it runs
    # between the timed calls and while the baselines are timed (slowing them).
    stream = torch.cuda.Stream()
    a = torch.randn(2048, 2048, device="cuda")
    while True:
        with torch.cuda.stream(stream):
            for _ in range(4):
                a = torch.tanh(a @ a)
        stream.synchronize()
        time.sleep(0.0005)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))
        threading.Thread(target=_spin, daemon=True).start()

    def forward(self, x):
        return cuda_extension.bias_relu_scale(x, self.bias, 2.0)
PY
run background FLAG_HACK "work_between_commands" --kernel-trace-library "$library" "$background"

fallback=$(workspace torch-fallback)
cat >"$fallback/model_new.py" <<'PY'
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Does the work with torch; the extension only scales a copy of the result by one."""

    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))
        self.zero = None

    def forward(self, x):
        y = x
        for _ in range(8):  # torch compute, well above the allowed share
            y = torch.relu(x + self.bias) * 2.0
        if self.zero is None or self.zero.shape[1] != x.shape[1]:
            self.zero = torch.zeros(1, x.shape[1], device=x.device)
        return cuda_extension.bias_relu_scale(y, self.zero, 1.0)
PY
run torch-fallback FLAG_HACK "kernel_fallback" --kernel-trace-library "$library" "$fallback"

# The cost of tracing on the candidate's own time (honest vs honest-untraced medians).
traced=$(jq -r '.profile.times_ms.candidate.median // empty' "$out/honest.jsonl" 2>/dev/null)
plain=$(jq -r '.profile.times_ms.candidate.median // empty' "$out/honest-untraced.jsonl" 2>/dev/null)
if [[ -n $traced && -n $plain ]]; then
  say ""
  say "tracing cost: candidate median $traced ms traced vs $plain ms untraced ($(awk -v a="$traced" -v b="$plain" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }'))"
fi
say "honest kernel table:"
jq -r '.profile.kernels[]? | "  \(.share * 100 | round)%  \(.total_ms) ms  \(.calls) calls  \(.class)  \(.name | .[0:80])"' \
  "$out/honest.jsonl" 2>/dev/null | tee -a "$table"
say "failures: $failures"
exit $((failures > 0))
