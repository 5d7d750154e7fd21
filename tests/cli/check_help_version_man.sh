#!/usr/bin/env bash
# Shared by every tool's help_version_man.sh: BIN_DIR TOOL FLAG.
# --help and --version print to stdout and exit 0; --help names FLAG; every long option in --help is
# documented in man/TOOL.1 and every option the man page documents exists; an
# unknown flag exits 2.
source "$(dirname "$0")/lib.sh"
bin=$1 tool=$2 flag=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
"$bin/$tool" --help >"$scratch/help" || fail "--help exited $?"
grep -q -- "$flag" "$scratch/help" || fail "--help lacks $flag"
"$bin/$tool" --version >"$scratch/version" || fail "--version exited $?"
grep -q "^$tool " "$scratch/version" || fail "--version lacks the program line"
for dep in simdjson CLI11 SQLite OpenSSL "CUDA driver"; do
  grep -q "$dep:" "$scratch/version" || fail "--version lacks $dep"
done
grep -oE -- '--[a-z][a-z0-9-]+' "$scratch/help" | sort -u >"$scratch/help-options"
# Man page options are written as \-\-name in roff.
grep -oE -- '\\-\\-[a-z][a-z0-9\\-]+' "$root/man/$tool.1" | sed 's/\\//g' | sort -u >"$scratch/man-options"
if ! diff -u "$scratch/help-options" "$scratch/man-options"; then
  fail "options in --help and man/$tool.1 differ (- help, + man)"
fi
code=0
"$bin/$tool" --no-such-flag >/dev/null 2>&1 || code=$?
[[ $code == 2 ]] || fail "unknown flag exited $code, expected 2"
echo "ok"
