# Shared by the filter's behaviour scripts (tests/cli/filter/*.sh): after tests/cli/lib.sh, call
# filter_setup BIN_DIR. It sets $filter (the program), $records (make_records.sh) and a shared
# discovery cache, and exits 0 with "skipped: ..." where task code cannot run here: no Python
# with torch, or an OS sandbox below the minimum (the same as the sandbox unit tests do).
filter_setup() {
  filter=$1/cudaagent-filter
  records=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/make_records.sh
  export CUDAAGENT_CACHE_DIR=${CUDAAGENT_CACHE_DIR:-$1/../test-cache}
  if ! "$filter" --device cpu </dev/null >/dev/null 2>"$scratch/probe"; then
    if grep -q -e "below the minimum" -e "no Python with torch" "$scratch/probe"; then
      echo "skipped: $(cat "$scratch/probe")"
      exit 0
    fi
    fail "cudaagent-filter cannot start: $(cat "$scratch/probe")"
  fi
}

# The checks of one record's reasons, comma-separated: "determinism" or "constant,input_dependence".
checks_of() {
  jq -r --arg id "$2" 'select(.id == $id) | [.filter.reasons[].check] | join(",")' "$1"
}

kept_of() {
  jq -r --arg id "$2" 'select(.id == $id) | .filter.kept' "$1"
}

# A copy of share/ in $scratch/share whose harness/filter_task.py is the wrapper read from standard
# input; the real job is real_filter_task.py beside it, which the wrapper runs at its end with
#   sys.argv[0] = os.path.join(os.path.dirname(__file__), "real_filter_task.py")
#   runpy.run_path(sys.argv[0], run_name="__main__")
# Run the filter with CUDAAGENT_SHARE_DIR=$scratch/share (and unsandboxed, as the wrappers need).
wrap_filter_task() {
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  cp -r "$root/share" "$scratch/share"
  mv "$scratch/share/harness/filter_task.py" "$scratch/share/harness/real_filter_task.py"
  cat >"$scratch/share/harness/filter_task.py"
}
