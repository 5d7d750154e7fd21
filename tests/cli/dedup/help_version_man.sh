#!/usr/bin/env bash
# --help and --version print to stdout and exit 0; every long option in --help is documented in
# the man page and every option the man page documents exists (STYLE.md 15).
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
"$bin/cudaagent-dedup" --help >"$scratch/help" || fail "--help exited $?"
grep -q -- "--threshold" "$scratch/help" || fail "--help lacks --threshold"
grep -q -- "--db" "$scratch/help" && fail "--help offers --db, which dedup does not use"
"$bin/cudaagent-dedup" --version >"$scratch/version" || fail "--version exited $?"
grep -q "^cudaagent-dedup " "$scratch/version" || fail "--version lacks the program line"
for dep in simdjson CLI11 SQLite OpenSSL; do
  grep -q "$dep:" "$scratch/version" || fail "--version lacks $dep"
done
grep -oE -- '--[a-z][a-z-]+' "$scratch/help" | sort -u >"$scratch/help-options"
# Man page options are written as \-\-name in roff.
grep -oE -- '\\-\\-[a-z][a-z\\-]+' "$root/man/cudaagent-dedup.1" | sed 's/\\//g' | sort -u >"$scratch/man-options"
if ! diff -u "$scratch/help-options" "$scratch/man-options"; then
  fail "options in --help and man/cudaagent-dedup.1 differ (- help, + man)"
fi
# The man page names the measure the records carry.
measure=$("$bin/cudaagent-dedup" -q "$root/share/examples/dedup/tasks.jsonl" | head -1 |
  grep -oE '"measure":"[^"]+"' | cut -d'"' -f4)
[[ -n $measure ]] || fail "no measure in the output"
grep -qF -- "$measure" "$root/man/cudaagent-dedup.1" || fail "man page does not name the measure $measure"
code=0
"$bin/cudaagent-dedup" --no-such-flag >/dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "unknown flag exited $code, expected 2"
echo "ok"
