#!/usr/bin/env bash
# Can a candidate run a call's forwards side by side when a call holds several
# (--forwards-per-call)? Three candidates with the same slow one-block kernel
# (tests/gpu/forward_overlap/): serial, on the current stream; overlap, each forward on the next of
# eight side streams that wait for nothing; lookahead, whose first forward of a call computes every
# slot's output at once from the inputs already in the shared buffer. All three answer right. Each
# is profiled with FORWARDS forwards per call and each --forward-sync (lookahead with "each"
# only); per way, a candidate's time per forward over the serial one's.
#   overlap, each: the runner waits for the whole device after every forward, so the ratio must
#     stay near 1 (below 0.8 fails this check: the default would pay for it)
#   overlap, call: nothing orders two forwards on unrelated streams; reported (why "call" is not
#     the default)
#   lookahead, each: no wait between forwards helps, since a later slot's inputs exist from the
#     call's start; reported (why more than one forward per call is not the default)
# Usage: tests/gpu/forward_overlap_check.sh BIN_DIR OUT_DIR [FORWARDS (32)]. Needs CUDA.
set -uo pipefail
(($# >= 2)) || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1 out=$2 forwards=${3:-32}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
example=$root/share/examples/workspaces/bias-relu-cuda
for arm in serial overlap lookahead; do
  ws=$out/$arm
  rm -rf "$ws" && mkdir -p "$ws/kernels"
  cp "$example/model.py" "$example/model_new.py" "$ws/"
  cp "$root/tests/gpu/forward_overlap/slow_bias_relu.cu" "$ws/kernels/bias_relu.cu"
  # The serial arm's binding is the example's own: the kernel on the caller's current stream.
  binding=$root/tests/gpu/forward_overlap/${arm}_binding.cpp
  [[ $arm == serial ]] && binding=$example/kernels/bias_relu_binding.cpp
  cp "$binding" "$ws/kernels/bias_relu_binding.cpp"
done
# profile ARM SYNC: the candidate's median ms per forward (empty if none), its record kept.
profile() {
  "$bin/cudaagent-profile" --quiet --device cuda --task "$out/$1/model.py" --compile-mode none \
    --forwards-per-call "$forwards" --forward-sync "$2" "$out/$1" >"$out/$1-$2.json" 2>>"$out/log.txt"
  jq -r '.profile.times_ms.candidate.median // empty' "$out/$1-$2.json"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "n/a" }'; }
verdict() { jq -r '.profile.verdict // "none"' "$out/$1-$2.json"; }
table=$out/results.md
echo "| forward sync | serial ms/forward | overlap ms (ratio) | lookahead ms (ratio) | verdicts |" >"$table"
echo "|---|---|---|---|---|" >>"$table"
status=0
for sync in each call; do
  serial=$(profile serial "$sync")
  overlap=$(profile overlap "$sync")
  verdicts="$(verdict serial "$sync") / $(verdict overlap "$sync")"
  lookahead="" lookahead_ratio=""
  if [[ $sync == each ]]; then
    lookahead=$(profile lookahead each)
    lookahead_ratio=$(ratio "$lookahead" "$serial")
    verdicts+=" / $(verdict lookahead each)"
  fi
  overlap_ratio=$(ratio "$overlap" "$serial")
  echo "| $sync | $serial | $overlap ($overlap_ratio) | ${lookahead:+$lookahead ($lookahead_ratio)} | $verdicts |" >>"$table"
  if [[ $sync == each ]] && ! awk -v r="$overlap_ratio" 'BEGIN { exit !(r != "n/a" && r >= 0.8) }'; then
    echo "forward_overlap_check: FAIL: with --forward-sync each the overlapping candidate took $overlap_ratio of the serial one's time" >&2
    status=1
  fi
done
cat "$table"
exit "$status"
