#!/usr/bin/env bash
# Runs one verify catalog case in a verifier of its own: BIN_DIR BASE_WORKSPACE CASE_DIR DEVICE.
# How a case directory is laid out and judged: case_lib.sh. `expected` holds the verdict the
# candidate must get; the pristine task is the base's model.py unless the case has a `task.py`;
# `flags` (optional) holds extra cudaagent-verify arguments, split at white space (e.g. a low
# --build-cpu for a compiler CPU burn, or --no-python-policy for the cases that test the layers
# beneath model_new.py's static policy); `check.sh` (optional) runs afterwards with the record on
# stdin, for cases whose verdict alone does not prove the point; `pending` (optional) says why the
# expected verdict is not reached yet: the case then exits 77 (skipped) while the verdict differs.
# CI runs the catalog in groups (run_cases.sh); this is for one case at a time.
set -euo pipefail
bin=$1 base=$2 case_dir=$3 device=$4
source "$(dirname "$0")/case_lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
assemble_case "$case_dir" "$base" "$work/ws"
flags=()
read -ra flags <<<"$(case_flags "$case_dir")"
"$bin/cudaagent-verify" --quiet --device "$device" --task "$(case_task "$case_dir" "$base")" \
  --timeout "${CUDAAGENT_CASE_TIMEOUT:-20}" ${flags[@]+"${flags[@]}"} "$work/ws" \
  >"$work/record.json" 2>"$work/stderr" || {
  echo "cudaagent-verify exited $?"; cat "$work/stderr"; exit 1; }
status=0
judge_record "$case_dir" "$work/record.json" || status=$?
exit $status
