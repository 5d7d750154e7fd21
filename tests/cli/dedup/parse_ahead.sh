#!/usr/bin/env bash
# With --jobs N the tasks of regular input files are parsed ahead on N helpers; stdin and pipes
# are parsed record by record. Both paths, and any number of helpers, give the same records,
# sharded or not.
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
refs=(-r "$root/share/examples/dedup/reference")
# The examples and the malformed case, twice over (so the stream holds duplicates), as one file.
cat "$root/share/examples/dedup/tasks.jsonl" "$root/tests/cli/dedup/malformed/stdin" \
  "$root/share/examples/dedup/tasks.jsonl" >"$scratch/in.jsonl"
"$bin/cudaagent-dedup" -q "${refs[@]}" --annotate -j 1 "$scratch/in.jsonl" >"$scratch/serial" ||
  fail "serial run exited $?"
# Error records name their source: the same file, or "-" for stdin.
from_stdin() { sed "s|\"source\":\"$scratch/in.jsonl\"|\"source\":\"-\"|" "$1"; }
grep -q '"kept":false' "$scratch/serial" || fail "the input holds no duplicates"
grep -q '"error"' "$scratch/serial" || fail "the input holds no errors"
for jobs in 2 3; do
  "$bin/cudaagent-dedup" "${refs[@]}" --annotate -j $jobs "$scratch/in.jsonl" >"$scratch/ahead" \
    2>"$scratch/err" || fail "exit $?"
  grep -q "parsed 17 tasks ahead on $jobs AST helpers" "$scratch/err" ||
    fail "not parsed ahead: $(cat "$scratch/err")"
  cmp "$scratch/serial" "$scratch/ahead" || fail "--jobs $jobs on a file differs from serial"
  "$bin/cudaagent-dedup" "${refs[@]}" --annotate -j $jobs <"$scratch/in.jsonl" >"$scratch/piped" \
    2>"$scratch/err" || fail "exit $?"
  grep -q "ahead" "$scratch/err" && fail "stdin was parsed ahead"
  cmp <(from_stdin "$scratch/serial") "$scratch/piped" || fail "--jobs $jobs on stdin differs"
done
"$bin/cudaagent-dedup" -q "${refs[@]}" --annotate --shard 1/2 <"$scratch/in.jsonl" >"$scratch/s1" ||
  fail "exit $?"
"$bin/cudaagent-dedup" -q "${refs[@]}" --annotate --shard 1/2 -j 2 "$scratch/in.jsonl" \
  >"$scratch/s2" || fail "exit $?"
cmp "$scratch/s1" <(from_stdin "$scratch/s2") || fail "a shard parsed ahead differs"
[[ -s $scratch/s1 ]] || fail "empty shard"
echo "ok"
