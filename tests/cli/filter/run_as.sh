#!/usr/bin/env bash
# --run-as: task processes run as the given user (root only), and a bad value is a usage error.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
if [[ $(id -u) != 0 ]]; then
  echo "skipped: needs root"
  exit 0
fi
filter_setup "$1"
"$records" reports_uid | "$filter" --device cpu --run-as 65534:65533 >"$scratch/out" 2>"$scratch/err" ||
  fail "exit $?: $(cat "$scratch/err")"
detail=$(jq -r '.filter.reasons[0].detail' "$scratch/out")
[[ $detail == "RuntimeError: uid 65534 gid 65533" ]] || fail "the task ran as: $detail"
echo "ok"
