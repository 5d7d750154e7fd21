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
