#!/usr/bin/env bash
# cudaagent-dedup on N synthetic tasks (bench/make_dedup_tasks.py, seed fixed) against a local
# KernelBench checkout's levels 1-3 (250 tasks; never committed: fetch it yourself). Three runs:
# references only (N x 250 comparisons, the goal), references and stream on 2 threads, and the
# same on 1 thread. Prints one Markdown table row per run from the tool's own summary line
# (comparison time is measured around the index alone; parsing is the Python AST helper).
# Usage: bench/run_dedup_bench.sh [BIN_DIR] [KERNELBENCH_DIR] [N]
#        (defaults: build/release/bin, .kernelbench/KernelBench, 6000)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
kernelbench=${2:-$here/.kernelbench/KernelBench}
count=${3:-6000}
data=${CUDAAGENT_BENCH_DIR:-/tmp/cudaagent-bench}
mkdir -p "$data"
tasks=$data/dedup-tasks-$count.jsonl
[[ -s $tasks ]] || python3 "$here/bench/make_dedup_tasks.py" "$count" 1 >"$tasks"
references=()
for level in level1 level2 level3; do
  [[ -d $kernelbench/$level ]] || { echo "no $kernelbench/$level" >&2; exit 1; }
  references+=(--reference "kb-$level=$kernelbench/$level")
done

run() {  # name, then dedup arguments
  local name=$1 start end summary
  shift
  start=$(date +%s.%N)
  "$bin/cudaagent-dedup" "${references[@]}" "$@" "$tasks" -o "$data/dedup-out.jsonl" \
    2>"$data/dedup-err"
  end=$(date +%s.%N)
  summary=$(grep "tasks kept" "$data/dedup-err")
  awk -v name="$name" -v s="$summary" -v wall="$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" '
    BEGIN {
      match(s, /[0-9]+ of [0-9]+ tasks kept/); kept = substr(s, RSTART, RLENGTH)
      match(s, /parsing [0-9.]+ s/); parse = substr(s, RSTART + 8, RLENGTH - 10)
      match(s, /[0-9]+ comparisons in [0-9.]+ s/); cmp = substr(s, RSTART, RLENGTH)
      split(cmp, c, " ")
      printf "| %s | %s | %s | %s | %.2f | %.2f |\n", name, kept, c[1], c[4], parse, wall
    }'
}

echo "tasks: $tasks ($(wc -l <"$tasks") records); references: $kernelbench level1-3" >&2
echo "| run | kept | comparisons | comparing (s) | parsing (s) | wall (s) |"
echo "|---|---|---|---|---|---|"
run "references only, --jobs 2" --references-only --jobs 2
run "references only, --jobs 1" --references-only --jobs 1
run "references + stream, --jobs 2" --jobs 2
run "references + stream, --jobs 1" --jobs 1
