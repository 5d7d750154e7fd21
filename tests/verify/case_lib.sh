# Sourced: assembles a verify catalog case's workspace. A case directory overlays a base workspace:
# its files replace or add files (kernels/... too), `remove` lists files to delete, `setup.sh`
# (optional) runs in the assembled workspace (to make symlinks, FIFOs or hard links), and
# `task.py` (optional) is both the task and the workspace's model.py. The other files of a case
# say how to judge it and are never copied: `expected`, `flags`, `check.sh`, `pending`, README.

# assemble_case CASE_DIR BASE_WORKSPACE DEST: DEST must not exist; its parent is the case's own
# (a setup.sh may write beside the workspace, e.g. a secret to hard-link).
assemble_case() {
  local case_dir=$1 base=$2 dest=$3 file
  cp -r "$base" "$dest"
  if [[ -f $case_dir/task.py ]]; then cp "$case_dir/task.py" "$dest/model.py"; fi
  (cd "$case_dir" && find . -type f ! -name expected ! -name remove ! -name setup.sh ! -name check.sh \
    ! -name README ! -name task.py ! -name flags ! -name pending) |
    while read -r file; do
      mkdir -p "$dest/$(dirname "$file")"
      cp "$case_dir/$file" "$dest/$file"
    done
  if [[ -f $case_dir/remove ]]; then
    while read -r file; do rm -f "$dest/$file"; done <"$case_dir/remove"
  fi
  if [[ -f $case_dir/setup.sh ]]; then (cd "$dest" && bash "$case_dir/setup.sh"); fi
}

# case_task CASE_DIR BASE_WORKSPACE: the pristine task the case is judged against.
case_task() {
  if [[ -f $1/task.py ]]; then echo "$1/task.py"; else echo "$2/model.py"; fi
}

# case_flags CASE_DIR: the case's extra cudaagent-verify arguments on one line.
case_flags() {
  if [[ -f $1/flags ]]; then tr '\n' ' ' <"$1/flags" | sed 's/ *$//'; fi
}

# judge_record CASE_DIR RECORD_FILE: prints the case's verdict line and says whether the record is
# what the case expects (`expected` may list several verdicts, space-separated, any of which will
# do): 0 it is (and check.sh, if any, agrees), 1 it is not, 77 the case is
# `pending` and its verdict not reached yet (a pending case that reaches it fails, so that the
# marker is removed).
judge_record() {
  local case_dir=$1 record=$2 expected verdict reason
  expected=$(cat "$case_dir/expected")
  verdict=$(jq -r '.verify.verdict // ("error record: " + (.error.reason // "none"))' "$record")
  reason=$(jq -r '.verify.reason // ""' "$record")
  echo "$(basename "$case_dir"): $verdict ($reason)"
  if [[ -f $case_dir/pending ]]; then
    if [[ " $expected " == *" $verdict "* ]]; then
      echo "$expected is reached now: remove $case_dir/pending"
      return 1
    fi
    echo "pending (expected $expected): $(cat "$case_dir/pending")"
    if [[ -f $case_dir/check.sh ]] && ! bash "$case_dir/check.sh" <"$record"; then return 1; fi
    return 77
  fi
  if [[ " $expected " != *" $verdict "* ]]; then
    echo "expected $expected"
    jq . "$record" | head -80
    return 1
  fi
  if [[ -f $case_dir/check.sh ]] && ! bash "$case_dir/check.sh" <"$record"; then
    echo "$(basename "$case_dir"): check.sh failed"
    return 1
  fi
  return 0
}
