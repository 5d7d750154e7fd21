#!/usr/bin/env bash
# The AST helper failing: an interpreter that cannot start is exit 1 with the reason; a helper
# that dies on one task turns that task into an error record and a new helper takes the rest; a
# helper that cannot be restarted ends the run with exit 1.
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
code=0
"$bin/cudaagent-dedup" --python /nonexistent/python3 "$root/share/examples/dedup/tasks.jsonl" \
  >"$scratch/out" 2>"$scratch/err" || code=$?
[[ $code == 1 ]] || fail "a missing interpreter exited $code"
grep -q "/nonexistent/python3" "$scratch/err" || fail "no reason: $(cat "$scratch/err")"
[[ -s $scratch/out ]] && fail "records written without a helper"

# A python that runs the real helper, except that it dies (exit 3) on a task holding CRASH_HELPER;
# with FAIL_AFTER=N it refuses to start more than N times.
cat >"$scratch/crashing.py" <<PY
import os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import ast_features
real = ast_features.answer
def answer(line):
    if b"CRASH_HELPER" in line:
        sys.stderr.write("crashing on purpose\n")
        os._exit(3)
    return real(line)
ast_features.answer = answer
ast_features.main()
PY
cat >"$scratch/python" <<SH
#!/usr/bin/env bash
n=\$(( \$(cat "$scratch/starts" 2>/dev/null || echo 0) + 1 ))
echo \$n >"$scratch/starts"
if [[ -n \${FAIL_AFTER:-} && \$n -gt \$FAIL_AFTER ]]; then echo "refusing to start" >&2; exit 5; fi
exec python3 -I -B "$scratch/crashing.py" "\$2"
SH
chmod +x "$scratch/python"
task() { printf '{"id":"%s","task":{"model_py":"import torch\\nclass Model(torch.nn.Module):\\n    def forward(self, x):\\n        return torch.%s(x)  # %s\\n"}}\n' "$1" "$2" "$3"; }
{ task before relu -; task crash tanh CRASH_HELPER; task after sigmoid -; } >"$scratch/in"

"$bin/cudaagent-dedup" --python "$scratch/python" "$scratch/in" >"$scratch/out" 2>"$scratch/err" ||
  fail "a crash on one task failed the run: $(cat "$scratch/err")"
grep -q '"reason":"task.model_py could not be parsed: the AST helper ended (exited with code 3): crashing on purpose"' \
  "$scratch/out" || fail "no error record for the crash: $(cat "$scratch/out")"
grep -q '^{"id":"after",.*"dedup":{"kept":true' "$scratch/out" || fail "the task after the crash was lost"
grep -q '^{"id":"before",.*"dedup":{"kept":true' "$scratch/out" || fail "the task before the crash was lost"
grep -q "restarted 1 times" "$scratch/err" || fail "no restart reported: $(cat "$scratch/err")"

rm -f "$scratch/starts"
code=0
FAIL_AFTER=1 "$bin/cudaagent-dedup" --python "$scratch/python" "$scratch/in" >"$scratch/out2" \
  2>"$scratch/err2" || code=$?
[[ $code == 1 ]] || fail "an unrestartable helper exited $code"
grep -q "cannot restart the AST helper" "$scratch/err2" || fail "no reason: $(cat "$scratch/err2")"
echo "ok"
