#!/usr/bin/env bash
# Runs verify catalog cases through as few verifier processes as their settings allow:
# BIN_DIR BASE_WORKSPACE DEVICE CASE_DIR...
# Cases that share a task and flags go through one cudaagent-verify, in turn, as an agent's
# candidates do: its warm workers and the task's evaluation session serve them all, so a case pays
# for its build and its calls, not for a process and torch starting. Every candidate still gets a
# fresh runner and empty writable space (the class of state left between candidates is what the
# order here exercises). Each record is then judged as run_case.sh judges one (case_lib.sh).
# Exit 0 when every case got what it expects (a `pending` case that has not is reported, not
# failed), 1 otherwise.
set -uo pipefail
bin=$1 base=$2 device=$3
shift 3
source "$(dirname "$0")/case_lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Group the cases by what their verifier is given: the task and the flags.
declare -A group_of_key=()
declare -a group_cases=() group_task=() group_flags=()
for case_dir in "$@"; do
  case_dir=${case_dir%/}
  key="$(case_task "$case_dir" "$base")|$(case_flags "$case_dir")"
  if [[ -z ${group_of_key[$key]+set} ]]; then
    group_of_key[$key]=${#group_task[@]}
    group_task+=("$(case_task "$case_dir" "$base")")
    group_flags+=("$(case_flags "$case_dir")")
    group_cases+=("")
  fi
  index=${group_of_key[$key]}
  group_cases[index]+="$case_dir"$'\n'
done

failures=0 pending=0 judged=0
for ((g = 0; g < ${#group_task[@]}; g++)); do
  dirs=() cases=()
  while IFS= read -r case_dir; do
    [[ -n $case_dir ]] || continue
    name=$(basename "$case_dir")
    mkdir "$work/$name"
    assemble_case "$case_dir" "$base" "$work/$name/$name"
    dirs+=("$work/$name/$name")
    cases+=("$case_dir")
  done <<<"${group_cases[g]}"
  flags=()
  read -ra flags <<<"${group_flags[g]}"
  echo "== ${#cases[@]} case(s), task $(basename "${group_task[g]}"), flags: ${group_flags[g]:-none}"
  start=$SECONDS
  "$bin/cudaagent-verify" --quiet --device "$device" --task "${group_task[g]}" \
    --timeout "${CUDAAGENT_CASE_TIMEOUT:-20}" ${flags[@]+"${flags[@]}"} "${dirs[@]}" \
    >"$work/records-$g.jsonl" 2>"$work/stderr-$g"
  code=$?
  echo "   $((SECONDS - start)) s in one verifier"
  if [[ $code != 0 ]]; then
    echo "cudaagent-verify exited $code"
    cat "$work/stderr-$g"
    failures=$((failures + 1))
  fi
  # Records come in the order of the workspaces; each names its own (the id is the folder's name).
  for case_dir in "${cases[@]}"; do
    name=$(basename "$case_dir")
    jq -c --arg id "$name" 'select(.id == $id)' "$work/records-$g.jsonl" >"$work/$name.json"
    if [[ $(wc -l <"$work/$name.json") != 1 ]]; then
      echo "$name: $(wc -l <"$work/$name.json") records, expected one"
      failures=$((failures + 1))
      continue
    fi
    judged=$((judged + 1))
    judge_record "$case_dir" "$work/$name.json"
    case $? in
      0) ;;
      77) pending=$((pending + 1)) ;;
      *) failures=$((failures + 1)) ;;
    esac
  done
done
echo "cases: $# judged: $judged pending: $pending failures: $failures"
[[ $failures == 0 ]]
