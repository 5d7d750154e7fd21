#!/usr/bin/env bash
# Runs one golden CLI case: PROGRAM CASE_DIR. Compares stdout and the exit code with the case's
# expectations; stderr is shown on failure but not compared (it is for people).
# CUDAAGENT_REGENERATE=1 writes the current output as the new expectation instead.
set -uo pipefail
program=$1
case_dir=$2
args=()
if [[ -f $case_dir/args ]]; then
  while IFS= read -r line || [[ -n $line ]]; do args+=("$line"); done <"$case_dir/args"
fi
stdin=/dev/null
[[ -f $case_dir/stdin ]] && stdin=$case_dir/stdin
actual_out=$(mktemp)
actual_err=$(mktemp)
trap 'rm -f "$actual_out" "$actual_err"' EXIT
"$program" "${args[@]}" <"$stdin" >"$actual_out" 2>"$actual_err"
code=$?
if [[ ${CUDAAGENT_REGENERATE:-0} == 1 ]]; then
  cp "$actual_out" "$case_dir/expected.stdout"
  echo "$code" >"$case_dir/expected.exit"
  echo "regenerated $case_dir (exit $code)"
  exit 0
fi
status=0
expected_code=$(cat "$case_dir/expected.exit")
if [[ $code != "$expected_code" ]]; then
  echo "exit code $code, expected $expected_code"
  status=1
fi
if ! diff -u "$case_dir/expected.stdout" "$actual_out"; then
  status=1
fi
if [[ $status != 0 ]]; then
  echo "--- stderr:"
  cat "$actual_err"
fi
exit $status
