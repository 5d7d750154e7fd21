#!/usr/bin/env bash
# Can a candidate overlap one forward with the next in a call of several (--forwards-per-call)?
# Two candidates with the same slow one-block kernel (tests/gpu/forward_overlap/): one on the
# current stream, one on eight side streams that wait for nothing (its outputs still right). Each
# is profiled with every --forward-sync; per way, the overlapping candidate's time per forward over
# the serial one's. With "each" the runner waits for the whole device after every forward, so the
# ratio must stay near 1 (below 0.8 fails this check: the default would pay for overlap no single
# call sees). With "call" nothing orders two forwards on unrelated streams; the ratio is reported,
# and is why "call" is not the default.
# Usage: tests/gpu/forward_overlap_check.sh BIN_DIR OUT_DIR [FORWARDS (32)]. Needs CUDA.
set -uo pipefail
(($# >= 2)) || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1 out=$2 forwards=${3:-32}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
example=$root/share/examples/workspaces/bias-relu-cuda
for arm in serial overlap; do
  ws=$out/$arm
  rm -rf "$ws" && mkdir -p "$ws/kernels"
  cp "$example/model.py" "$example/model_new.py" "$ws/"
  cp "$root/tests/gpu/forward_overlap/slow_bias_relu.cu" "$ws/kernels/bias_relu.cu"
  cp "$root/tests/gpu/forward_overlap/${arm}_binding.cpp" "$ws/kernels/bias_relu_binding.cpp"
done
table=$out/results.md
echo "| forward sync | serial ms/forward | overlap ms/forward | overlap / serial | verdicts |" >"$table"
echo "|---|---|---|---|---|" >>"$table"
status=0
for sync in each call; do
  for arm in serial overlap; do
    "$bin/cudaagent-profile" --quiet --device cuda --task "$out/$arm/model.py" --compile-mode none \
      --forwards-per-call "$forwards" --forward-sync "$sync" "$out/$arm" >"$out/$arm-$sync.json" 2>>"$out/log.txt"
  done
  serial=$(jq -r '.profile.times_ms.candidate.median // empty' "$out/serial-$sync.json")
  overlap=$(jq -r '.profile.times_ms.candidate.median // empty' "$out/overlap-$sync.json")
  verdicts="$(jq -r .profile.verdict "$out/serial-$sync.json") / $(jq -r .profile.verdict "$out/overlap-$sync.json")"
  ratio=$(awk -v a="$overlap" -v b="$serial" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "n/a" }')
  echo "| $sync | $serial | $overlap | $ratio | $verdicts |" >>"$table"
  if [[ $sync == each ]] && ! awk -v r="$ratio" 'BEGIN { exit !(r != "n/a" && r >= 0.8) }'; then
    echo "forward_overlap_check: FAIL: with --forward-sync each the overlapping candidate took $ratio of the serial one's time" >&2
    status=1
  fi
done
cat "$table"
exit "$status"
