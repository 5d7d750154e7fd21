#!/usr/bin/env bash
# The real proof of the catalog: every entry, and a sample of composed tasks, generated at tiny
# sizes and run under torch (Model(*get_init_inputs())(*get_inputs())), with the output shape
# compared to the one the catalog predicts. Entries that need a newer torch than the one found
# are skipped with the reason. A negative control checks that a wrong shape rule is caught.
source "$(dirname "$0")/../lib.sh"
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
synth=$bin/cudaagent-synth

# The interpreter torch_env.h would pick: $CUDAAGENT_PYTHON, python3 on PATH, /usr/bin/python3.
python=
for candidate in ${CUDAAGENT_PYTHON:-} $(type -ap python3) /usr/bin/python3; do
  if "$candidate" -c 'import torch' 2>/dev/null; then python=$candidate; break; fi
done
[[ -n $python ]] || fail "no python3 that imports torch (set CUDAAGENT_PYTHON; scripts/setup.sh installs python3-torch)"
echo "torch from $python: $("$python" -c 'import torch; print(torch.__version__)')"

tiny=(--batch 2 --max-dim 16 --quiet)
count=0
for op in $("$synth" --list | cut -f1); do
  "$synth" "${tiny[@]}" --chain "$op" --count 2 --seed 3 >>"$scratch/entries.jsonl" || fail "--chain $op exited $?"
  count=$((count + 1))
done
[[ $count -ge 90 ]] || fail "only $count catalog entries listed"
grep -q '"error"' "$scratch/entries.jsonl" && fail "some entries could not be composed: $(grep '"error"' "$scratch/entries.jsonl" | head -3)"
"$synth" "${tiny[@]}" --count 150 --seed 11 --depth-weights 0.1,0.4,0.2,0.2,0.1 >"$scratch/composed.jsonl" || fail "composing exited $?"

# One interpreter for both sets: importing torch is most of the test's time.
cat "$scratch/entries.jsonl" "$scratch/composed.jsonl" >"$scratch/all.jsonl"
"$python" "$here/run_tasks.py" <"$scratch/all.jsonl" >"$scratch/all.log" 2>&1 || {
  cat "$scratch/all.log"
  fail "tasks failed under torch"
}
grep -E '^(SKIP|ran)' "$scratch/all.log"
expected=$(($(wc -l <"$scratch/all.jsonl") - $(grep -c '^SKIP' "$scratch/all.log")))
grep -q "^ran $expected, failed 0," "$scratch/all.log" || fail "not every task ran: $(tail -1 "$scratch/all.log")"

# Negative control: the same entry with a wrong shape rule (padding ignored) must be caught.
sed 's/"shape": "conv(out_channels, kernel_size, stride, padding, dilation)"/"shape": "conv(out_channels, kernel_size, stride, 0, dilation)"/' \
  "$root/share/synth/operators.json" >"$scratch/wrong.json"
cmp -s "$scratch/wrong.json" "$root/share/synth/operators.json" && fail "the negative control changed nothing"
"$synth" "${tiny[@]}" --catalog "$scratch/wrong.json" --chain conv2d --count 8 --seed 5 >"$scratch/wrong.jsonl"
if "$python" "$here/run_tasks.py" <"$scratch/wrong.jsonl" >"$scratch/wrong.log" 2>&1; then
  fail "a wrong shape rule went unnoticed"
fi
grep -q "FAIL conv2d: output shape" "$scratch/wrong.log" || fail "the wrong rule failed for another reason: $(head -3 "$scratch/wrong.log")"
echo "ok"
