#!/usr/bin/env bash
# Dropped records: left out of the output, written with their dedup key to --dropped, counted on
# stderr; with --annotate kept in the output too. Every input task ends up somewhere exactly once,
# a failed run leaves no output files, and an unusable reference entry is a warning, not a failure.
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
tasks=$root/share/examples/dedup/tasks.jsonl
refs=$root/share/examples/dedup/reference
ids() { grep -oE '^\{"id":"[^"]+"' "$1" | cut -d'"' -f4 | sort; }

"$bin/cudaagent-dedup" -r "$refs" --dropped "$scratch/dropped.jsonl" -o "$scratch/out.jsonl" \
  "$tasks" 2>"$scratch/err" || fail "exit $?"
[[ $(wc -l <"$scratch/out.jsonl") == 4 ]] || fail "expected 4 kept records"
[[ $(wc -l <"$scratch/dropped.jsonl") == 2 ]] || fail "expected 2 dropped records"
grep -q '"kept":true' "$scratch/dropped.jsonl" && fail "a kept record in --dropped"
grep -q '"kept":false' "$scratch/out.jsonl" && fail "a dropped record in the output"
grep -q '"nearest":{"set":"reference","name":"level2/conv_relu_bias.py"}' "$scratch/dropped.jsonl" ||
  fail "the set is not named after the directory"
grep -q "4 of 6 tasks kept, 2 above the threshold 0.900 (1 near a reference, 1 near an earlier task)" \
  "$scratch/err" || fail "stderr lacks the counts: $(cat "$scratch/err")"
cat "$scratch/out.jsonl" "$scratch/dropped.jsonl" >"$scratch/both"
diff <(ids "$scratch/both") <(ids "$tasks") || fail "kept + dropped is not the input"

"$bin/cudaagent-dedup" -q -r "$refs" --annotate --dropped "$scratch/dropped2.jsonl" "$tasks" \
  >"$scratch/annotated" || fail "exit $?"
[[ $(wc -l <"$scratch/annotated") == 6 ]] || fail "--annotate left records out"
cmp -s "$scratch/dropped.jsonl" "$scratch/dropped2.jsonl" || fail "--annotate changed --dropped"

code=0
"$bin/cudaagent-dedup" -q -r /nonexistent --dropped "$scratch/d3" -o "$scratch/o3" "$tasks" \
  2>"$scratch/err3" || code=$?
[[ $code == 1 ]] || fail "a missing reference exited $code"
grep -q "cannot open reference '/nonexistent'" "$scratch/err3" || fail "no reason: $(cat "$scratch/err3")"
[[ -e $scratch/d3 || -e $scratch/o3 ]] && fail "a failed run left output files"

mkdir -p "$scratch/refs/sub"
cp "$refs/level1/relu.py" "$scratch/refs/sub/"
printf 'def broken(:\n' >"$scratch/refs/broken.py"
"$bin/cudaagent-dedup" -r "kb=$scratch/refs" "$tasks" >"$scratch/out4" 2>"$scratch/err4" ||
  fail "a broken reference file failed the run"
grep -q "skipping reference 'kb/broken.py': does not parse: SyntaxError" "$scratch/err4" ||
  fail "no warning for the broken reference: $(cat "$scratch/err4")"
grep -q "reference set 'kb': 1 of 2 tasks" "$scratch/err4" || fail "reference count wrong"
echo "ok"
