#!/usr/bin/env bash
# --help and --version print to stdout and exit 0; every long option in --help is documented in
# the man page and every option the man page documents exists (STYLE.md 15).
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
"$bin/cudaagent-synth" --help >"$scratch/help" || fail "--help exited $?"
grep -q -- "--depth-weights" "$scratch/help" || fail "--help lacks --depth-weights"
"$bin/cudaagent-synth" --version >"$scratch/version" || fail "--version exited $?"
grep -q "^cudaagent-synth " "$scratch/version" || fail "--version lacks the program line"
for dep in simdjson CLI11 SQLite OpenSSL libcurl "CUDA driver"; do
  grep -q "$dep:" "$scratch/version" || fail "--version lacks $dep"
done
grep -oE -- '--[a-z][a-z0-9-]+' "$scratch/help" | sort -u >"$scratch/help-options"
# Man page options are written as \-\-name in roff.
grep -oE -- '\\-\\-[a-z][a-z0-9\\-]+' "$root/man/cudaagent-synth.1" | sed 's/\\//g' | sort -u >"$scratch/man-options"
if ! diff -u "$scratch/help-options" "$scratch/man-options"; then
  fail "options in --help and man/cudaagent-synth.1 differ (- help, + man)"
fi
code=0
"$bin/cudaagent-synth" --no-such-flag >/dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "unknown flag exited $code, expected 2"
echo "ok"
