#!/usr/bin/env bash
# JSONL throughput: read -> validate -> add a key -> write, through the shared record driver, on
# >= 1 GB of trajectory-sized records, pinned to one core; jq -c '.' on the same file in the same
# run is the anchor. Prints one Markdown table row per program for bench/RESULTS.md.
# Usage: bench/run_jsonl_bench.sh [BIN_DIR] [GB]   (defaults: build/release/bin, 1.05)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
gigabytes=${2:-1.05}
data=${CUDAAGENT_BENCH_DIR:-/tmp/cudaagent-bench}
mkdir -p "$data"
input=$data/trajectories-$gigabytes.jsonl
[[ -s $input ]] || "$bin/jsonl_bench" generate "$input" "$gigabytes" >&2
bytes=$(stat -c %s "$input")
records=$(wc -l <"$input")
cat "$input" >/dev/null  # warm the page cache so both programs read from memory

time_of() {  # prints the wall seconds of a command
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { print b - a }'
}

row() {  # name seconds
  awk -v name="$1" -v s="$2" -v b="$bytes" -v r="$records" \
    'BEGIN { printf "| %s | %.2f | %.0f | %.0f |\n", name, s, b / s / 1e6, r / s }'
}

echo "input: $input ($bytes bytes, $records records)" >&2
echo "| program | seconds | MB/s | records/s |"
echo "|---|---|---|---|"
ours=$(time_of taskset -c 0 "$bin/jsonl_bench" passthrough -q "$input" -o /dev/null)
row "cudaagent record driver (validate + add key)" "$ours"
out=$data/out.jsonl
ours_file=$(time_of taskset -c 0 "$bin/jsonl_bench" passthrough -q "$input" -o "$out")
row "same, written to a file" "$ours_file"
# Every input record must come out once, with the key added and nothing else changed.
test "$(wc -l <"$out")" -eq "$records"
test "$(head -c 200 "$out")" = "$(head -c 200 "$input")"
rm -f "$out"
jq_seconds=$(time_of taskset -c 0 jq -c . "$input")
row "jq -c . ($(jq --version))" "$jq_seconds"
