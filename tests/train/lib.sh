# Shared by the training CLI scripts: a scratch directory, failure reporting, the programs, and
# comparisons of metrics files and checkpoints. Usage: source lib.sh BIN_DIR
set -euo pipefail
bin=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
train() { "$bin/cudaagent-train" "$@"; }
trajectories() { "$bin/cudaagent-test-trajectories" "$@"; }
# A metrics file without its timings (the only part that differs between equal runs).
deterministic_metrics() { jq -c 'with_entries(select(.key | startswith("perf/") | not))' "$1"; }
# The newest checkpoint directory of a run.
latest() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")"; }
# Every tensor file of two checkpoints equal (exactly, or within tolerances given as extra args).
same_checkpoint() {
  local a=$1 b=$2
  shift 2
  (cd "$a" && find . -name '*.safetensors' | sort) >"$scratch/files-a"
  (cd "$b" && find . -name '*.safetensors' | sort) >"$scratch/files-b"
  diff -q "$scratch/files-a" "$scratch/files-b" >/dev/null || fail "checkpoints hold different files"
  while read -r file; do
    # torch's generator state is a struct's bytes, padding included: equal states can differ.
    case $file in ./rng*) continue ;; esac
    python3 "$here/compare_tensors.py" "$a/$file" "$b/$file" "$@" || fail "$file differs"
  done <"$scratch/files-a"
}
