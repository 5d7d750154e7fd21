#!/usr/bin/env bash
# --help and --version print to stdout and exit 0; every long option in --help is documented in
# the man page and every option the man page documents exists.
source "$(dirname "$0")/../lib.sh"
bin=$1
root=$(cd "$(dirname "$0")/../../.." && pwd)
"$bin/cudaagent-filter" --help >"$scratch/help" || fail "--help exited $?"
grep -q -- "--window-ms" "$scratch/help" || fail "--help lacks --window-ms"
"$bin/cudaagent-filter" --version >"$scratch/version" || fail "--version exited $?"
grep -q "^cudaagent-filter " "$scratch/version" || fail "--version lacks the program line"
for dep in simdjson CLI11 SQLite OpenSSL; do
  grep -q "$dep:" "$scratch/version" || fail "--version lacks $dep"
done
grep -oE -- '--[a-z][a-z-]+' "$scratch/help" | sort -u >"$scratch/help-options"
# Man page options are written as \-\-name in roff.
grep -oE -- '\\-\\-[a-z][a-z\\-]+' "$root/man/cudaagent-filter.1" | sed 's/\\//g' | sort -u >"$scratch/man-options"
if ! diff -u "$scratch/help-options" "$scratch/man-options"; then
  fail "options in --help and man/cudaagent-filter.1 differ (- help, + man)"
fi
for bad in --no-such-flag "--window-ms 5,1" "--window-ms 1" "--memory-limit 4X" "--run-as nobody" \
           "--device tpu" "--runs 0"; do
  code=0
  # shellcheck disable=SC2086
  "$bin/cudaagent-filter" $bad </dev/null >/dev/null 2>&1 || code=$?
  [[ $code == 2 ]] || fail "'$bad' exited $code, expected 2 (usage)"
done
echo "ok"
