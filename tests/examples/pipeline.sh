#!/usr/bin/env bash
# examples/pipeline.sh keeps what it makes in the folder it is given and names it at the end, says
# what its numbers mean (the CPU example is slower than eager by design), and a second run takes
# its scoring from the store it left. Usage: pipeline.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
"$src/examples/pipeline.sh" "$bin" "$out" >"$out/stdout.txt" 2>"$out/stderr.txt" ||
  fail "exit $?: $(tail -20 "$out/stderr.txt")"
for file in synthesized.jsonl filtered.jsonl tasks.jsonl candidates.jsonl scored.jsonl summary.txt \
  sample-scored.jsonl sample-errors.jsonl store.db plots/rewards.svg plots/fast_p.svg; do
  [[ -s $out/$file ]] || fail "$file is missing from the output folder"
done
grep -q "Outputs are in $out" "$out/stdout.txt" || fail "the folder is not named at the end: $(tail -5 "$out/stdout.txt")"
grep -q "below 1 by design" "$out/stdout.txt" || fail "the CPU example's speed is not explained"
[[ $(jq -r 'select(.id == "honest") | .reward.verdict' "$out/scored.jsonl") == PASS ]] || fail "honest: $(jq -c .reward "$out/scored.jsonl")"
[[ $(jq -r 'select(.id == "cheat") | .reward.value' "$out/scored.jsonl") == -1 ]] || fail "cheat was rewarded"
rows=$(sqlite3 "$out/store.db" "SELECT count(*) FROM results")
# Again, into the same folder: every verdict, profile and reward comes from the store.
"$src/examples/pipeline.sh" "$bin" "$out" >"$out/stdout2.txt" 2>"$out/stderr2.txt" || fail "second run: exit $?"
[[ $(sqlite3 "$out/store.db" "SELECT count(*) FROM results") == "$rows" ]] || fail "the second run added rows to the store"
[[ $(jq -r 'select(.id == "honest") | .profile.store.hit' "$out/scored.jsonl") == true ]] || fail "the second run timed again"
echo ok
