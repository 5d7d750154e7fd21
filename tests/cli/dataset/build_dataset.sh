#!/usr/bin/env bash
# scripts/build_dataset.sh on the CPU, end to end: prepare (synth, then dedup against a reference
# set and the stream) -> filter in three parts, each on a copy of the state folder as a fresh
# machine would get it (a fixed number of tasks; then, after part 1's end is made to look cut off,
# a time limit; then, after a save and a restore, until the target) -> finish. No task may be filtered twice or lost between parts, and the card's counts must be the
# records' own. Nothing is timed: the time limit only decides where part 2 stops.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../../filter/lib.bash"
filter_setup "$1"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$root/scripts/build_dataset.sh
command -v zstd >/dev/null || fail "needs zstd"
refs=$root/share/examples/dedup/reference
count=40 target=14

# A reference set holding one task of the stream itself (seed 1, index 5): prepare must drop it.
"$bin/cudaagent-synth" -q --seed 1 --count 6 --batch 2 --max-dim 16 | sed -n 6p >"$scratch/ref.jsonl"
planted=$(jq -r .id "$scratch/ref.jsonl")
[[ -n $planted ]] || fail "no reference task"

run() {  # PHASE ARGS...: the script, its stderr in $scratch/err
  "$build" "$@" --bin "$bin" 2>"$scratch/err" || fail "$1 exited $?: $(cat "$scratch/err")"
}
run prepare --device cpu --seed 1 --count $count --target $target --state "$scratch/m1/ops" \
  --reference "kb1=$refs/level1" --reference "kb2=$refs/level2" --reference "planted=$scratch/ref.jsonl"
s=$scratch/m1/ops
for f in state.json candidates.jsonl.gz results.jsonl.gz parts.jsonl; do [[ -f $s/$f ]] || fail "prepare left no $f"; done
gzip -dc "$s/candidates.jsonl.gz" | jq -r .id >"$scratch/candidates"
n_cand=$(wc -l <"$scratch/candidates")
jq -e --argjson c $count --argjson n "$n_cand" \
  '.synth.tasks == $c and .dedup.candidates == $n and .dedup.near_reference + .dedup.near_stream + $n == $c' \
  "$s/state.json" >/dev/null || fail "prepare's counts do not add up: $(cat "$s/state.json")"
jq -e --arg id "$planted" '.dedup.near_reference_tasks | map(.id) | index($id) != null' "$s/state.json" >/dev/null ||
  fail "the task planted in a reference set was not dropped"
grep -qx "$planted" "$scratch/candidates" && fail "the planted task is a candidate"
[[ $(sort "$scratch/candidates" | uniq -d) == "" ]] || fail "a candidate id twice"
gzip -dc "$s/candidates.jsonl.gz" | jq -e 'select(.nearest_kernelbench.measure == null or .dedup.measure == null)' >/dev/null &&
  fail "a candidate lacks its dedup annotations"
code=0
"$build" prepare --device cpu --state "$s" --bin "$bin" 2>/dev/null || code=$?
[[ $code == 1 ]] || fail "prepare over a prepared state exited $code, expected 1"

# Part 1: the next 6 candidates exactly. Each later part runs on a copy, as a fresh machine would.
run filter --state "$s" --max-tasks 6
[[ $(gzip -dc "$s/results.jsonl.gz" | jq -r .id) == $(head -6 "$scratch/candidates") ]] || fail "part 1 did not filter the first 6 candidates"
cp -r "$scratch/m1" "$scratch/m2" && rm -rf "$scratch/m1"
s=$scratch/m2/ops
[[ -f $s/filter.db.gz && ! -e $s/filter.db && -f $s/results.jsonl.gz && ! -e $s/results.jsonl ]] ||
  fail "the state does not travel compressed: $(ls "$s")"
# As if part 1's machine had gone away before its end: no summary, a cut last line, the store
# left uncompressed. Part 2 must take it as it is.
: >"$s/parts.jsonl"
gzip -d "$s/results.jsonl.gz"
printf '{"id":"cut off mid-li' >>"$s/results.jsonl"
gzip -d "$s/filter.db.gz"
# Part 2: at most 4 tasks (so that part 3 has work left), stopped by its time limit wherever it is
# (SIGTERM; no count is expected).
run filter --state "$s" --seconds 2 --grace 60 --max-tasks 4
# Between parts 2 and 3 the state goes through its committed copy (save, then restore on a
# machine that has nothing else), as it does between sessions: the store stays behind.
# (Part 2 may have been stopped before it finished a task: then only part 1 has results.)
p=$scratch/progress
saved_parts=$(gzip -dc "$s/results.jsonl.gz" | jq -r .part | sort -u | wc -l)
run save --state "$s" --progress "$p"
grep -q "$saved_parts new parts, 0 already there" "$scratch/err" || fail "save: $(cat "$scratch/err")"
run save --state "$s" --progress "$p"
grep -q "0 new parts, $saved_parts already there" "$scratch/err" || fail "a second save: $(cat "$scratch/err")"
want="./candidates.jsonl.gz ./parts.jsonl ./results/part-001.jsonl.gz "
((saved_parts == 1)) || want+="./results/part-002.jsonl.gz "
want+="./state.json "
[[ $(cd "$p" && find . -type f | sort | tr '\n' ' ') == "$want" ]] || fail "the saved copy holds: $(cd "$p" && find . -type f)"
saved_results=$(gzip -dc "$s/results.jsonl.gz")
rm -rf "$scratch/m2"
run restore --state "$scratch/m3/ops" --progress "$p"
s=$scratch/m3/ops
[[ $(gzip -dc "$s/results.jsonl.gz") == "$saved_results" ]] || fail "restore did not give back the saved results"
[[ ! -e $s/filter.db.gz ]] || fail "restore brought a store"
cp -r "$s" "$scratch/behind"  # the state as restored, kept to be saved over a newer copy below
code=0
"$build" restore --state "$s" --progress "$p" --bin "$bin" 2>/dev/null || code=$?
[[ $code == 1 ]] || fail "restore over a prepared state exited $code, expected 1"
# Part 3: until the target is in hand.
run filter --state "$s"
grep -q "the target is reached" "$scratch/err" || fail "part 3 did not reach the target: $(cat "$scratch/err")"
# A fourth call has nothing to do and records no part.
run filter --state "$s"
[[ $(wc -l <"$s/parts.jsonl") == 3 ]] || fail "expected 3 parts: $(cat "$s/parts.jsonl")"

[[ $(ls "$s" | tr '\n' ' ') == "candidates.jsonl.gz filter.db.gz parts.jsonl results.jsonl.gz state.json " ]] ||
  fail "the state holds: $(ls "$s")"
# Saving again adds part 3 only; a saved part that no longer matches the state is refused.
run save --state "$s" --progress "$p"
grep -q "1 new parts, $saved_parts already there" "$scratch/err" || fail "save after part 3: $(cat "$scratch/err")"
cp "$p/results/part-001.jsonl.gz" "$scratch/part1.gz"
gzip -dc "$scratch/part1.gz" | sed 1d | gzip -n >"$p/results/part-001.jsonl.gz"
code=0
"$build" save --state "$s" --progress "$p" --bin "$bin" 2>"$scratch/err" || code=$?
[[ $code == 1 ]] && grep -q "part-001.jsonl.gz differs" "$scratch/err" || fail "a changed saved part: exit $code, $(cat "$scratch/err")"
cp "$scratch/part1.gz" "$p/results/part-001.jsonl.gz"
# A state behind the saved copy (it lacks part 3) is refused too, and leaves the copy as it was.
before=$(cd "$p" && find . -type f | sort | xargs md5sum)
code=0
"$build" save --state "$scratch/behind" --progress "$p" --bin "$bin" 2>"$scratch/err" || code=$?
[[ $code == 1 ]] && grep -q "restore first" "$scratch/err" || fail "saving a state behind the copy: exit $code, $(cat "$scratch/err")"
[[ $(cd "$p" && find . -type f | sort | xargs md5sum) == "$before" ]] || fail "a refused save changed the saved copy"
gzip -dc "$s/results.jsonl.gz" >"$scratch/results.jsonl"

# Each id once, every one a candidate; part 1's lost summary recorded as cut off; nothing came from
# the store (a result computed by one part and missing from the state would be taken from the
# store by the next: that is how a lost result would show); the parts' records add up.
n_res=$(wc -l <"$scratch/results.jsonl")
[[ -z $(jq -r .id "$scratch/results.jsonl" | sort | uniq -d) ]] || fail "a task has two results"
[[ -z $(jq -r .id "$scratch/results.jsonl" | sort | comm -23 - <(sort "$scratch/candidates")) ]] ||
  fail "a result is not a candidate's"
jq -se '.[0] | .stop == "cut off: no summary" and .records == 6 and .fresh == null' "$s/parts.jsonl" >/dev/null ||
  fail "part 1's lost summary is not recorded as cut off: $(head -1 "$s/parts.jsonl")"
jq -se 'map(.from_store // 0) | add == 0' "$s/parts.jsonl" >/dev/null || fail "a part took results from the store"
jq -se --argjson n "$n_res" 'map(.records) | add == $n' "$s/parts.jsonl" >/dev/null || fail "the parts' records do not add up to $n_res"
jq -se --argjson n $((n_res - 6)) '.[1:] | map(.fresh) | add == $n' "$s/parts.jsonl" >/dev/null ||
  fail "parts 2 and 3 did not filter the other $((n_res - 6)) afresh"
[[ $(jq -r .part "$scratch/results.jsonl" | uniq | tr '\n' ' ') =~ ^1\ (2\ )?3\ $ ]] || fail "results out of part order"
kept=$(jq -s 'map(select(.filter.kept)) | length' "$scratch/results.jsonl")
((kept >= target)) || fail "only $kept kept"

# Finish: the first $target kept candidates in stream order, and a card that agrees with them.
run finish --state "$s" --out "$scratch/out"
zstd -q -dc "$scratch/out/tasks.jsonl.zst" >"$scratch/tasks.jsonl" || fail "cannot unpack the dataset"
# (A part stopped by a signal may leave a task cut short between two finished ones: stream order
# comes from the candidates, not from the order of the results.)
jq -r 'select(.filter.kept) | .id' "$scratch/results.jsonl" | sort >"$scratch/kept-ids"
grep -Fxf "$scratch/kept-ids" "$scratch/candidates" | head -$target >"$scratch/want"
[[ $(jq -r .id "$scratch/tasks.jsonl") == $(cat "$scratch/want") ]] || fail "the shipped ids are not the first $target kept"
jq -e 'select(.filter.kept != true or (.task.model_py | type) != "string")' "$scratch/tasks.jsonl" >/dev/null &&
  fail "a shipped record is not a kept task"
card=$scratch/out/card.json
check() {  # WHAT JQ-ON-CARD JQ-ON-RECORDS FILE
  local a b
  a=$(jq -cS "$2" "$card") b=$(jq -cSs "$3" "$4")
  [[ $a == "$b" ]] || fail "card's $1: $a, records: $b"
}
hist='group_by(.) | map({key: (.[0] | tostring), value: length}) | from_entries'
check shipped .shipped length "$scratch/tasks.jsonl"
check depth .depth "map(.task.meta.depth) | $hist" "$scratch/tasks.jsonl"
check "operator uses" '.families.operator_uses | add' 'map(.task.ops | length) | add' "$scratch/tasks.jsonl"
check "eager buckets" '[.eager_ms.buckets[].tasks] | add' length "$scratch/tasks.jsonl"
check "compile timed" .compile.timed "map(select(.filter.compile_ms != null)) | length" "$scratch/tasks.jsonl"
check "kernelbench buckets" '[.kernelbench.score_buckets[]] | add' length "$scratch/tasks.jsonl"
check "kernelbench max" .kernelbench.score_quantiles.max 'map(.nearest_kernelbench.score) | max | . * 10000 | round / 10000' "$scratch/tasks.jsonl"
check filtered .pipeline.filtered length "$scratch/results.jsonl"
check kept .pipeline.kept 'map(select(.filter.kept)) | length' "$scratch/results.jsonl"
check "first reasons" .rejections.first_reason "map(select(.filter.kept | not) | .filter.reasons[0].check) | $hist" "$scratch/results.jsonl"
check "every reason" .rejections.every_reason "map(select(.filter.kept | not) | .filter.reasons[].check) | $hist" "$scratch/results.jsonl"
check "torch" '.environment.torch | keys' 'map(.filter.torch) | unique' "$scratch/results.jsonl"
check parts '.parts | length' length "$s/parts.jsonl"
jq -e --argjson n "$n_cand" '.pipeline.candidates == $n and .made.seed == 1 and .made.count == 40' "$card" >/dev/null ||
  fail "the card's settings: $(jq -c .made "$card")"
grep -q "^# ops: $target PyTorch tasks" "$scratch/out/CARD.md" || fail "CARD.md's title: $(head -1 "$scratch/out/CARD.md")"
grep -q -- "scripts/build_dataset.sh all --device cpu --seed 1 --count $count --target $target" "$scratch/out/CARD.md" ||
  fail "CARD.md lacks the rebuild command"

# Asking for more than the state holds fails unless --partial.
jq '.target = 1000' "$s/state.json" >"$scratch/st" && cp "$scratch/st" "$s/state.json"
code=0
"$build" finish --state "$s" --out "$scratch/out2" --bin "$bin" 2>"$scratch/err" || code=$?
[[ $code == 1 ]] && grep -q "kept tasks are in hand" "$scratch/err" || fail "a short finish exited $code: $(cat "$scratch/err")"
run finish --state "$s" --out "$scratch/out2" --partial --budget-gpu-hours 0.000001
# With the target out of reach, a last part filters every candidate that is left: now each
# candidate has exactly one result (none lost, none twice), none from the store, and the store
# holds one row per result filtered since it was made.
run filter --state "$s"
grep -q "0 candidates are left\|stopped: finished" "$scratch/err" || fail "part 4 did not run to the end: $(cat "$scratch/err")"
gzip -dc "$s/results.jsonl.gz" >"$scratch/results.jsonl"
[[ $(jq -r .id "$scratch/results.jsonl" | sort) == $(sort "$scratch/candidates") ]] ||
  fail "after the last part the results are not the candidates, each once"
jq -se 'map(.from_store // 0) | add == 0' "$s/parts.jsonl" >/dev/null || fail "a part took results from the store"
gzip -dc "$s/filter.db.gz" >"$scratch/filter.db"
rows=$(sqlite3 "$scratch/filter.db" "SELECT count(*) FROM results WHERE stage = 'filter'")
# (The store was left behind at the restore: it holds what parts 3 and 4 filtered.)
since_restore=$((n_cand - $(grep -c . <<<"$saved_results")))
[[ $rows == "$since_restore" ]] || fail "the store holds $rows results for the $since_restore candidates filtered since the restore"
grep -q "A partial build" "$scratch/out2/CARD.md" || fail "a partial card does not say so"
# The card weighs the filter's time against its budget: 1 GPU-hour by default (the CPU parts here
# take seconds), a millionth of one above.
jq -e '.filter_time.budget_gpu_hours == 1 and .filter_time.within_budget == true' "$card" >/dev/null ||
  fail "the card's budget: $(jq -c .filter_time "$card")"
grep -q "Within the budget of 1 GPU-hour for $target tasks" "$scratch/out/CARD.md" || fail "CARD.md does not weigh the budget"
jq -e '.filter_time.within_budget == false' "$scratch/out2/card.json" >/dev/null ||
  fail "a build over its budget: $(jq -c .filter_time "$scratch/out2/card.json")"
grep -q "Over the budget of 1e-06 GPU-hours" "$scratch/out2/CARD.md" || fail "CARD.md does not say the build went over: $(grep -i budget "$scratch/out2/CARD.md")"
code=0
"$build" nonsense 2>/dev/null || code=$?
[[ $code == 2 ]] || fail "an unknown phase exited $code"
echo "ok: $n_cand candidates, $n_res filtered in 3 parts, $kept kept, $target shipped"
