#!/usr/bin/env bash
# Shards of one run hold exactly the run's tasks (task i of a seed is the same everywhere), -o
# writes the same bytes as stdout, and a reader that goes away ends the run quietly with 141.
source "$(dirname "$0")/../lib.sh"
bin=$1
synth=$bin/cudaagent-synth
"$synth" -q --seed 8 --count 60 >"$scratch/all.jsonl" || fail "the whole run exited $?"
[[ $(wc -l <"$scratch/all.jsonl") == 60 ]] || fail "expected 60 records"
for i in 0 1 2; do
  "$synth" -q --seed 8 --count 60 --shard "$i/3" >"$scratch/shard$i.jsonl" || fail "shard $i exited $?"
  [[ $(wc -l <"$scratch/shard$i.jsonl") == 20 ]] || fail "shard $i has $(wc -l <"$scratch/shard$i.jsonl") records"
done
sort "$scratch"/shard?.jsonl >"$scratch/merged"
sort "$scratch/all.jsonl" >"$scratch/sorted"
cmp -s "$scratch/merged" "$scratch/sorted" || fail "the shards together differ from the whole run"
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 "$synth" -q --seed 8 --count 60 >"$scratch/slurm.jsonl"
cmp -s "$scratch/slurm.jsonl" "$scratch/shard1.jsonl" || fail "Slurm's variables do not pick shard 1/3"
# A longer run starts with the shorter one's tasks; another seed gives other tasks.
"$synth" -q --seed 8 --count 30 | cmp -s - <(head -30 "$scratch/all.jsonl") || fail "--count 30 is not a prefix of --count 60"
"$synth" -q --seed 9 --count 60 | cmp -s - "$scratch/all.jsonl" && fail "seeds 8 and 9 gave the same tasks"
"$synth" -q --seed 8 --count 60 -o "$scratch/file.jsonl" || fail "-o exited $?"
cmp -s "$scratch/file.jsonl" "$scratch/all.jsonl" || fail "-o wrote other bytes than stdout"
# Ids are the SHA-256 of model_py.
python3 - "$scratch/all.jsonl" <<'P' || fail "an id is not the SHA-256 of model_py"
import hashlib, json, sys
for line in open(sys.argv[1]):
    record = json.loads(line)
    assert record["id"] == hashlib.sha256(record["task"]["model_py"].encode()).hexdigest()
P
code=0
"$synth" --seed 8 --count 1000000 2>"$scratch/err" | head -1 >/dev/null || code=${PIPESTATUS[0]}
[[ $code == 141 ]] || fail "a closed pipe exited $code, expected 141"
[[ ! -s $scratch/err ]] || fail "a closed pipe printed: $(cat "$scratch/err")"
echo "ok"
