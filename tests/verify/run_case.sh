#!/usr/bin/env bash
# Runs one verify catalog case: BIN_DIR BASE_WORKSPACE CASE_DIR DEVICE.
# The case directory overlays the base workspace: its files replace or add files (kernels/... too),
# `remove` lists files to delete, `setup.sh` (optional) runs in the assembled workspace (to make
# symlinks or FIFOs), and `expected` holds the verdict the candidate must get. The pristine task
# is the base's model.py, passed with --task, unless the case has a `task.py` (then that is the
# task, and the workspace's model.py). `flags` (optional) holds extra cudaagent-verify arguments,
# split at white space (e.g. a low --build-cpu for a compiler CPU burn, or --no-python-policy for
# the cases that test the layers beneath model_new.py's static policy). `check.sh` (optional) runs
# afterwards with the record on stdin, for cases whose verdict alone does not prove the point.
# `pending` (optional) says why the expected verdict is not reached yet: the case then exits 77
# (skipped) while the verdict differs, and fails once it matches, so that the marker is removed.
set -euo pipefail
bin=$1 base=$2 case_dir=$3 device=$4
expected=$(cat "$case_dir/expected")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$base" "$work/ws"
task="$base/model.py"
if [[ -f $case_dir/task.py ]]; then
  task="$case_dir/task.py"
  cp "$task" "$work/ws/model.py"
fi
flags=()
if [[ -f $case_dir/flags ]]; then read -ra flags <<<"$(tr '\n' ' ' <"$case_dir/flags")"; fi
(cd "$case_dir" && find . -type f ! -name expected ! -name remove ! -name setup.sh ! -name check.sh \
  ! -name README ! -name task.py ! -name flags ! -name pending) |
  while read -r file; do
    mkdir -p "$work/ws/$(dirname "$file")"
    cp "$case_dir/$file" "$work/ws/$file"
  done
if [[ -f $case_dir/remove ]]; then
  while read -r file; do rm -f "$work/ws/$file"; done <"$case_dir/remove"
fi
if [[ -f $case_dir/setup.sh ]]; then (cd "$work/ws" && bash "$case_dir/setup.sh"); fi
timeout="${CUDAAGENT_CASE_TIMEOUT:-20}"
"$bin/cudaagent-verify" --quiet --device "$device" --task "$task" --timeout "$timeout" \
  ${flags[@]+"${flags[@]}"} "$work/ws" >"$work/record.json" 2>"$work/stderr" || {
  echo "cudaagent-verify exited $?"; cat "$work/stderr"; exit 1; }
verdict=$(jq -r '.verify.verdict' "$work/record.json")
reason=$(jq -r '.verify.reason' "$work/record.json")
echo "$(basename "$case_dir"): $verdict ($reason)"
if [[ -f $case_dir/pending ]]; then
  if [[ $verdict == "$expected" ]]; then
    echo "$expected is reached now: remove $case_dir/pending"
    exit 1
  fi
  echo "pending (expected $expected): $(cat "$case_dir/pending")"
  if [[ -f $case_dir/check.sh ]]; then bash "$case_dir/check.sh" <"$work/record.json"; fi
  exit 77
fi
if [[ $verdict != "$expected" ]]; then
  echo "expected $expected"
  jq . "$work/record.json" | head -80
  exit 1
fi
if [[ -f $case_dir/check.sh ]]; then bash "$case_dir/check.sh" <"$work/record.json"; fi
