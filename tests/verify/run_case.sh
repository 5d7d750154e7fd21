#!/usr/bin/env bash
# Runs one verify catalog case: BIN_DIR BASE_WORKSPACE CASE_DIR DEVICE.
# The case directory overlays the base workspace: its files replace or add files (kernels/... too),
# `remove` lists files to delete, `setup.sh` (optional) runs in the assembled workspace (to make
# symlinks or FIFOs), and `expected` holds the verdict the candidate must get. The pristine task
# is always the base's model.py, passed with --task. `check.sh` (optional) runs afterwards with the
# record on stdin, for cases whose verdict alone does not prove the point. `flags` (optional) holds
# extra cudaagent-verify arguments on one line (e.g. a low --build-cpu for a compiler CPU burn).
set -euo pipefail
bin=$1 base=$2 case_dir=$3 device=$4
expected=$(cat "$case_dir/expected")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$base" "$work/ws"
(cd "$case_dir" && find . -type f ! -name expected ! -name remove ! -name setup.sh ! -name check.sh ! -name README ! -name flags) |
  while read -r file; do
    mkdir -p "$work/ws/$(dirname "$file")"
    cp "$case_dir/$file" "$work/ws/$file"
  done
if [[ -f $case_dir/remove ]]; then
  while read -r file; do rm -f "$work/ws/$file"; done <"$case_dir/remove"
fi
if [[ -f $case_dir/setup.sh ]]; then (cd "$work/ws" && bash "$case_dir/setup.sh"); fi
timeout="${CUDAAGENT_CASE_TIMEOUT:-20}"
extra=()
if [[ -f $case_dir/flags ]]; then read -ra extra <"$case_dir/flags"; fi
"$bin/cudaagent-verify" --quiet --device "$device" --task "$base/model.py" --timeout "$timeout" \
  "${extra[@]}" "$work/ws" >"$work/record.json" 2>"$work/stderr" || {
  echo "cudaagent-verify exited $?"; cat "$work/stderr"; exit 1; }
verdict=$(jq -r '.verify.verdict' "$work/record.json")
reason=$(jq -r '.verify.reason' "$work/record.json")
echo "$(basename "$case_dir"): $verdict ($reason)"
if [[ $verdict != "$expected" ]]; then
  echo "expected $expected"
  jq . "$work/record.json" | head -80
  exit 1
fi
if [[ -f $case_dir/check.sh ]]; then bash "$case_dir/check.sh" <"$work/record.json"; fi
