#!/usr/bin/env bash
# cudaagent-synth throughput and what the tasks look like: --count N tasks (default 6000) for
# three seeds, pinned to one core, then statistics of the first run's tasks. Prints Markdown for
# bench/RESULTS-synth.md. Usage: bench/run_synth_bench.sh [BIN_DIR] [COUNT]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
count=${2:-6000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| seed | tasks | wall s | CPU s | tasks/s (wall) | tasks/s (CPU) |"
echo "|---|---|---|---|---|---|"
for seed in 1 2 3; do
  /usr/bin/time -f "%e %U %S" -o "$out/time" taskset -c 0 "$bin/cudaagent-synth" -q --seed "$seed" \
    --count "$count" -o "$out/tasks$seed.jsonl"
  read -r wall user sys <"$out/time"
  awk -v s="$seed" -v n="$count" -v w="$wall" -v c="$(echo "$user + $sys" | bc)" \
    'BEGIN { printf "| %d | %d | %.2f | %.2f | %.0f | %.0f |\n", s, n, w, c, n / w, n / c }'
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out/tasks1.jsonl" "$here/share/synth/operators.json" <<'P'
import collections, json, math, sys
records = [json.loads(line) for line in open(sys.argv[1])]
tasks = [r["task"] for r in records if "task" in r]
family = {op["name"]: op["family"] for op in json.load(open(sys.argv[2]))["operators"]}
print("\nseed 1: %d records, %d tasks, %d error records, %d distinct ids" %
      (len(records), len(tasks), len(records) - len(tasks), len({r["id"] for r in records if "id" in r})))
depths = collections.Counter(t["meta"]["depth"] for t in tasks)
print("depths: " + ", ".join("%d: %.2f%%" % (d, 100 * n / len(tasks)) for d, n in sorted(depths.items())))
ms = sorted(t["meta"]["est_eager_ms"] for t in tasks)
q = lambda p: ms[int(p * (len(ms) - 1))]
print("estimated eager ms: p5 %.2f, p50 %.2f, p95 %.2f, max %.2f" % (q(.05), q(.5), q(.95), ms[-1]))
uses = collections.Counter(op for t in tasks for op in t["ops"])
fams = collections.Counter(family[op] for t in tasks for op in t["ops"])
print("operators used: %d of %d; least used %s, most used %s" %
      (len(uses), len(family), uses.most_common()[-1], uses.most_common(1)[0]))
print("operator uses by family: " + ", ".join("%s %d" % kv for kv in fams.most_common()))
gib = sorted(sum(math.prod(s) for s in t["meta"]["input_shapes"]) * 4 / 2**30 for t in tasks)
print("input GiB: p50 %.2f, p95 %.2f, max %.2f" % (gib[len(gib) // 2], gib[int(.95 * len(gib))], gib[-1]))
print("tasks needing torch > 1.13: %d" % sum(t["meta"]["min_torch"] != "1.13" for t in tasks))
P
