#!/usr/bin/env bash
# Can input-independent GPU work escape the timed window? Three candidates of the example's task
# with the same kernel (bindings in tests/gpu/window_escape/; the stall kernel is
# g-unjoined-side-stream's): plain, the example's own binding; before, a stall of about
# 0.5 ms on a stream that waits for nothing, launched first, that the caller's stream then waits
# for; after, the output's kernel and then the stall on a stream ordered after it but
# never joined back. All three answer right. Each is profiled with the tools' default call timer
# (the GPU clock) and each --forward-sync, one forward per call; per way, the candidate's median
# time minus plain's.
#   before, each and call: the stall must be inside the window (at least 0.4 ms more than plain;
#     less fails this check: the owner's first event came after the runner's early work)
#   after, each: the runner waits for the whole device before the output's copy, so the stall must
#     be inside the window too (at least 0.4 ms; less fails)
#   after, call: the copy and "done" follow the caller's stream only, so the stall may run past
#     the window; then the kernel trace's output marks must catch it: the stall timed (at least
#     0.4 ms) or the reward withheld (work_after_output), never an untimed PASS
#   plain and before: PASS under both (the output marks raise nothing on honest work)
# PROFILE_ARGS: more profile arguments for every run (--call-lead-us N: does the lead, which
# opens the window later, let "before"'s stall run ahead of it?).
# Usage: tests/gpu/window_escape_check.sh BIN_DIR OUT_DIR. Needs CUDA.
set -uo pipefail
(($# == 2)) || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
example=$root/share/examples/workspaces/bias-relu-cuda
for arm in plain before after; do
  ws=$out/$arm
  rm -rf "$ws" && mkdir -p "$ws/kernels"
  cp "$example/model.py" "$example/model_new.py" "$ws/"
  cp "$example/kernels/bias_relu.cu" "$ws/kernels/"
  if [[ $arm == plain ]]; then
    cp "$example/kernels/bias_relu_binding.cpp" "$ws/kernels/"
  else
    cp "$root/tests/gpu/cases/g-unjoined-side-stream/kernels/stall.cu" "$ws/kernels/"
    cp "$root/tests/gpu/window_escape/${arm}_binding.cpp" "$ws/kernels/bias_relu_binding.cpp"
  fi
done
# profile ARM SYNC: the candidate's median ms per call after the call's cost (empty if none).
profile() {
  "$bin/cudaagent-profile" --quiet --device cuda --task "$out/$1/model.py" --compile-mode none \
    --forward-sync "$2" ${PROFILE_ARGS:-} "$out/$1" >"$out/$1-$2.json" 2>>"$out/log.txt"
  jq -r '.profile.times_ms.candidate.median // empty' "$out/$1-$2.json"
}
extra() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "") printf "%.3f", a - b; else print "n/a" }'; }
verdict() { jq -r '.profile.verdict // "none"' "$out/$1-$2.json"; }
table=$out/results.md
echo "| forward sync | plain ms | before: ms (extra) | after: ms (extra) | verdicts |" >"$table"
echo "|---|---|---|---|---|" >>"$table"
status=0
for sync in each call; do
  plain=$(profile plain "$sync")
  before=$(profile before "$sync")
  after=$(profile after "$sync")
  before_extra=$(extra "$before" "$plain")
  after_extra=$(extra "$after" "$plain")
  echo "| $sync | $plain | $before ($before_extra) | $after ($after_extra) | $(verdict plain "$sync") / $(verdict before "$sync") / $(verdict after "$sync") |" >>"$table"
  for arm in plain before; do
    if [[ $(verdict "$arm" "$sync") != PASS ]]; then
      echo "window_escape_check: FAIL: $arm, --forward-sync $sync: $(verdict "$arm" "$sync"), not PASS" >&2
      status=1
    fi
  done
  for way in before after; do
    if [[ $way == after && $sync == call && $(verdict after call) != PASS ]]; then
      (($(jq '[.. | objects | select(.name? == "work_after_output" and .raised == true)] | length' "$out/after-call.json") > 0)) ||
        { echo "window_escape_check: FAIL: after, call: withheld, but not by work_after_output" >&2; status=1; }
      continue
    fi
    value=$before_extra
    [[ $way == after ]] && value=$after_extra
    if ! awk -v x="$value" 'BEGIN { exit !(x != "n/a" && x >= 0.4) }'; then
      echo "window_escape_check: FAIL: $way, --forward-sync $sync: the stall added $value ms, not the ~0.5 ms it takes" >&2
      status=1
    fi
  done
done
cat "$table"
exit "$status"
